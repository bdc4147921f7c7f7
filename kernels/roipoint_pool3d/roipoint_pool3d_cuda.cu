// CUDA kernels of roipoint_pool3d, two launches:
//  1. select: one block per box scans its batch's points in index order,
//     kPerThread * kThreads points a round (the loads of a round in flight
//     together); a ballot scan gives each inside point its rank, the first S
//     ranks store their point index; the scan stops once S points are held.
//  2. fill: one thread per output element (coalesced writes), gathering
//     point kept[k % count] of its box.
// The geometry is kernels/common/box3d.h in float (double for double).
// 64-bit offsets; no host synchronisation.

#include "roipoint_pool3d/roipoint_pool3d_kernels.h"

#include "common/box3d.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <limits>

namespace mmops {
namespace kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kPerThread = 4;
constexpr int kFillThreads = 256;

// The exclusive rank of `flag` among the block's flags in thread order, and
// (block_count) how many are set. Every thread of the block calls it.
__device__ int block_rank(bool flag, int* s_warp_counts, int& block_count) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  if (lane == 0) {
    s_warp_counts[warp] = __popc(ballot);
  }
  __syncthreads();
  int before = 0;
  block_count = 0;
  for (int w = 0; w < kWarps; ++w) {
    const int count = s_warp_counts[w];
    before += w < warp ? count : 0;
    block_count += count;
  }
  __syncthreads(); // s_warp_counts is written again by the next call
  return before + __popc(ballot & ((1u << lane) - 1u));
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    select_kernel(const scalar_t* __restrict__ pts, const scalar_t* __restrict__ boxes, int64_t n, int64_t m, int64_t s,
                  int32_t* __restrict__ kept, int32_t* __restrict__ counts, int32_t* __restrict__ empty) {
  __shared__ int s_warp_counts[kWarps];
  const int64_t box_row = blockIdx.x;
  const int64_t b = box_row / m;
  const auto box = box3d::Box3d<acc_t>::load(boxes + 7 * box_row);
  const scalar_t* batch_pts = pts + 3 * b * n;
  int64_t total = 0; // the same in every thread
  for (int64_t base = 0; base < n && total < s; base += kThreads * kPerThread) {
    bool inside[kPerThread];
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int64_t i = base + r * kThreads + threadIdx.x;
      inside[r] = i < n && box.contains(static_cast<acc_t>(batch_pts[3 * i]), static_cast<acc_t>(batch_pts[3 * i + 1]),
                                        static_cast<acc_t>(batch_pts[3 * i + 2]));
    }
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      int count = 0;
      const int rank = block_rank(inside[r], s_warp_counts, count);
      if (inside[r] && total + rank < s) {
        kept[box_row * s + total + rank] = static_cast<int32_t>(base + r * kThreads + threadIdx.x);
      }
      total += count;
    }
  }
  if (threadIdx.x == 0) {
    counts[box_row] = static_cast<int32_t>(total < s ? total : s);
    empty[box_row] = total == 0 ? 1 : 0;
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kFillThreads)
    fill_kernel(const scalar_t* __restrict__ pts, const scalar_t* __restrict__ feats, const int32_t* __restrict__ kept,
                const int32_t* __restrict__ counts, int64_t n, int64_t m, int64_t c, int64_t s, int64_t total,
                scalar_t* __restrict__ out) {
  const int64_t row_len = 3 + c;
  for (int64_t e = int64_t(blockIdx.x) * kFillThreads + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * kFillThreads) {
    const int64_t row = e / row_len;
    const int64_t col = e - row * row_len;
    const int64_t box_row = row / s;
    const int64_t count = counts[box_row];
    scalar_t value = scalar_t(0);
    if (count > 0) {
      const int64_t src = (box_row / m) * n + kept[box_row * s + (row - box_row * s) % count];
      value = col < 3 ? pts[3 * src + col] : feats[c * src + col - 3];
    }
    out[e] = value;
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
  at::Tensor kept = at::empty({batch, m, s}, pts.options().dtype(at::kInt));
  at::Tensor counts = at::empty({batch, m}, pts.options().dtype(at::kInt));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t total = pooled.numel();
  const int64_t fill_blocks = std::min<int64_t>((total + kFillThreads - 1) / kFillThreads, int64_t(1) << 20);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, pts.scalar_type(), "mmops::roipoint_pool3d (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    select_kernel<scalar_t, acc_t><<<static_cast<unsigned>(batch * m), kThreads, 0, stream>>>(
        pts.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), n, m, s, kept.mutable_data_ptr<int32_t>(),
        counts.mutable_data_ptr<int32_t>(), empty.mutable_data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (total > 0) {
      fill_kernel<scalar_t><<<static_cast<unsigned>(fill_blocks), kFillThreads, 0, stream>>>(
          pts.const_data_ptr<scalar_t>(), feats.const_data_ptr<scalar_t>(), kept.const_data_ptr<int32_t>(),
          counts.const_data_ptr<int32_t>(), n, m, c, s, total, pooled.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return {pooled, empty};
}

} // namespace kernels
} // namespace mmops
