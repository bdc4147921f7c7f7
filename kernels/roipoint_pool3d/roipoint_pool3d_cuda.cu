// CUDA kernels of roipoint_pool3d, two launches:
//  1. select: one block (kThreads) per box scans its batch's points in
//     chunks of kChunk: each thread tests kPerThread points of a chunk (all
//     their loads in flight together); ballots and one warp scan of the
//     per-(round, warp) counts give every inside point its rank in index
//     order, and the first S ranks store their point index (a stable
//     compaction). The scan stops after the chunk in which S points are held.
//     Three __syncthreads a chunk.
//  2. fill: a group of `lanes` threads (a power of two, 4 to 32) per output
//     row writes the row's 3 + C values (coalesced); block (box, part) takes
//     rows part, part + parts, ... of one box, so the slot kept[k % count]
//     advances by a fixed step with no division; a box with no point gets
//     zeros.
// The geometry is kernels/common/box3d.h in float (double for double).
// 64-bit offsets; no host synchronisation.

#include "roipoint_pool3d/roipoint_pool3d_kernels.h"

#include "common/box3d.h"
#include "common/slot_scan_cuda.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <limits>

namespace mmops {
namespace kernels {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 512; // select block: one box
constexpr int kWarps = kThreads / 32;
constexpr int kPerThread = 8; // points a thread tests per chunk
constexpr int kChunk = kThreads * kPerThread;
constexpr int kSlots = kPerThread * kWarps; // (round, warp) counts of a chunk

constexpr int kFillThreads = 256;
constexpr int64_t kFillRowsPerBlock = 64; // rows of one box a fill block writes (about)
constexpr int64_t kMaxParts = 65535;      // gridDim.y

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    select_kernel(const scalar_t* __restrict__ pts, const scalar_t* __restrict__ boxes, int64_t n, int64_t m, int64_t s,
                  int32_t* __restrict__ kept, int32_t* __restrict__ counts, int32_t* __restrict__ empty) {
  __shared__ int32_t s_slot[kSlots];
  __shared__ int32_t s_chunk_total;
  const int64_t box_row = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const unsigned lanes_below = (1u << lane) - 1u;
  const auto box = box3d::Box3d<acc_t>::load(boxes + 7 * box_row);
  const scalar_t* batch_pts = pts + 3 * (box_row / m) * n;
  int32_t* box_kept = kept + box_row * s;
  int64_t total = 0; // inside points so far, the same in every thread
  for (int64_t base = 0; base < n && total < s; base += kChunk) {
    acc_t xyz[kPerThread][3];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t i = base + k * kThreads + threadIdx.x;
#pragma unroll
      for (int d = 0; d < 3; ++d) {
        xyz[k][d] = i < n ? static_cast<acc_t>(batch_pts[3 * i + d]) : acc_t(0);
      }
    }
    unsigned ballot[kPerThread];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t i = base + k * kThreads + threadIdx.x;
      ballot[k] = __ballot_sync(kFullMask, i < n && box.contains(xyz[k][0], xyz[k][1], xyz[k][2]));
    }
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        s_slot[k * kWarps + warp] = __popc(ballot[k]);
      }
    }
    __syncthreads();
    if (warp == 0) {
      slot_scan::exclusive_scan_slots<kSlots>(s_slot, &s_chunk_total);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      if ((ballot[k] >> lane) & 1u) { // slots are ordered (round, warp), lanes by index: index order
        const int64_t rank = total + s_slot[k * kWarps + warp] + __popc(ballot[k] & lanes_below);
        if (rank < s) {
          box_kept[rank] = static_cast<int32_t>(base + k * kThreads + threadIdx.x);
        }
      }
    }
    total += s_chunk_total;
    __syncthreads(); // s_slot and s_chunk_total are written again by the next chunk
  }
  if (threadIdx.x == 0) {
    counts[box_row] = static_cast<int32_t>(total < s ? total : s);
    empty[box_row] = total == 0 ? 1 : 0;
  }
}

// Block (x: box, y: part). `lanes` threads (1 << lanes_log2) per row.
template <typename scalar_t>
__global__ void __launch_bounds__(kFillThreads)
    fill_kernel(const scalar_t* __restrict__ pts, const scalar_t* __restrict__ feats, const int32_t* __restrict__ kept,
                const int32_t* __restrict__ counts, int64_t n, int64_t m, int64_t c, int64_t s, int lanes_log2,
                scalar_t* __restrict__ out) {
  const int64_t box_row = blockIdx.x;
  const int64_t row_len = 3 + c;
  const int lane = threadIdx.x & ((1 << lanes_log2) - 1);
  const int64_t groups = kFillThreads >> lanes_log2; // rows written together by the block
  const int64_t stride = groups * gridDim.y;         // between a group's rows
  int64_t k = int64_t(blockIdx.y) * groups + (threadIdx.x >> lanes_log2);
  scalar_t* box_out = out + box_row * s * row_len;
  const int64_t count = counts[box_row];
  if (count == 0) {
    for (; k < s; k += stride) {
      for (int64_t col = lane; col < row_len; col += int64_t(1) << lanes_log2) {
        box_out[k * row_len + col] = scalar_t(0);
      }
    }
    return;
  }
  const int32_t* box_kept = kept + box_row * s;
  const scalar_t* batch_pts = pts + 3 * (box_row / m) * n;
  const scalar_t* batch_feats = feats + c * (box_row / m) * n;
  const int64_t slot_step = stride % count;
  int64_t slot = k % count; // k % count, advanced with k
  for (; k < s; k += stride) {
    const int64_t src = box_kept[slot];
    const scalar_t* xyz = batch_pts + 3 * src;
    const scalar_t* f = batch_feats + c * src;
    scalar_t* dst = box_out + k * row_len;
    for (int64_t col = lane; col < row_len; col += int64_t(1) << lanes_log2) {
      dst[col] = col < 3 ? xyz[col] : f[col - 3];
    }
    slot += slot_step;
    if (slot >= count) {
      slot -= count;
    }
  }
}

} // namespace

std::tuple<at::Tensor, at::Tensor> roipoint_pool3d_cuda(const at::Tensor& points, const at::Tensor& point_features,
                                                        const at::Tensor& boxes3d, int64_t num_sampled_points) {
  const c10::cuda::CUDAGuard guard(points.device());
  const at::Tensor pts = points.contiguous();
  const at::Tensor feats = point_features.contiguous();
  const at::Tensor boxes = boxes3d.contiguous();
  const int64_t batch = pts.size(0), n = pts.size(1), c = feats.size(2), m = boxes.size(1);
  const int64_t s = num_sampled_points;
  at::Tensor pooled = at::empty({batch, m, s, 3 + c}, pts.options());
  at::Tensor empty = at::empty({batch, m}, pts.options().dtype(at::kInt));
  if (batch * m == 0) {
    return {pooled, empty};
  }
  TORCH_CHECK(batch * m <= std::numeric_limits<int32_t>::max(), "mmops::roipoint_pool3d: ", batch * m,
              " boxes are more than one CUDA launch covers");
  // one allocation: kept [B * M, S], then counts [B * M]
  at::Tensor scratch = at::empty({batch * m * (s + 1)}, pts.options().dtype(at::kInt));
  int32_t* kept = scratch.mutable_data_ptr<int32_t>();
  int32_t* counts = kept + batch * m * s;
  int lanes_log2 = 2; // 4 lanes a row at least (3 + C >= 3)
  while (lanes_log2 < 5 && (int64_t(1) << lanes_log2) < 3 + c) {
    ++lanes_log2;
  }
  const int64_t groups = kFillThreads >> lanes_log2;
  const int64_t rows_per_block = std::max<int64_t>(kFillRowsPerBlock, groups); // each group a row at least
  const int64_t parts = std::min<int64_t>((s + rows_per_block - 1) / rows_per_block, kMaxParts);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::roipoint_pool3d (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    select_kernel<scalar_t, acc_t><<<static_cast<unsigned>(batch * m), kThreads, 0, stream>>>(
        pts.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), n, m, s, kept, counts,
        empty.mutable_data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (pooled.numel() > 0) {
      const dim3 grid(static_cast<unsigned>(batch * m), static_cast<unsigned>(parts));
      fill_kernel<scalar_t><<<grid, kFillThreads, 0, stream>>>(pts.const_data_ptr<scalar_t>(),
                                                               feats.const_data_ptr<scalar_t>(), kept, counts, n, m, c,
                                                               s, lanes_log2, pooled.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return {pooled, empty};
}

} // namespace kernels
} // namespace mmops
