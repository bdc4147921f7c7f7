// CUDA kernels of roiaware_pool3d.
// Forward: one launch, one block (kThreads) per roi, four phases separated by
// __syncthreads (no host synchronisation, no ATen op between steps):
//  1. test: every thread tests kPerThread points of each kChunk-point chunk
//     (all the chunk's loads in flight together) and writes the point's voxel
//     (or -1) to point_voxels; ballots and one warp scan of the per-(round,
//     warp) counts compact the in-box points into a per-roi list in index
//     order (stable), and a shared-memory histogram (integer atomics: order
//     free) counts them per voxel.
//  2. offsets: a block scan of the per-voxel counts, capped at max_kept (the
//     voxel_counts output), gives each voxel's start in the roi's group list.
//  3. rank: warp 0 walks only the compacted in-box list in index order, 32
//     entries a step (__match_any_sync finds lanes with the same voxel): the
//     point's rank in its voxel keeps it (rank < max_kept, mmcv's "first
//     max_kept points in index order") at start + rank of the group list, or
//     sets its point_voxels entry back to -1. The list is staged in shared
//     memory kStage entries at a time by the whole block.
//  4. pool: the block's threads write the roi's (voxel, channel) outputs,
//     channels fastest, each over its voxel's kept points in point order
//     (roiaware_pool3d_math::pool_voxel, shared with the CPU kernel).
// The voxel tables (histogram / walk counters, starts) live in shared memory
// up to kSmemVoxels voxels a roi, else in a global scratch row per roi.
// Backward: one thread per (point, channel), summing over the rois in index
// order (a gather: deterministic, no atomics).
// The geometry is kernels/common/box3d.h in float (double for double).

#include "roiaware_pool3d/roiaware_pool3d_kernels.h"
#include "roiaware_pool3d/roiaware_pool3d_math.h"

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
#include <tuple>

namespace mmops {
namespace kernels {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 512; // forward block: one roi
constexpr int kWarps = kThreads / 32;
constexpr int kPerThread = 8; // points a thread tests per chunk
constexpr int kChunk = kThreads * kPerThread;
constexpr int kSlots = kPerThread * kWarps; // (round, warp) in-box counts of a chunk
constexpr int kStage = 1024;                // in-box list entries staged for the walk
constexpr int kScanItems = 4;               // voxels a thread sums per scan round
constexpr int64_t kSmemVoxels = 4096;       // voxel tables in shared memory up to this many voxels

constexpr int kBackwardThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;

// The exclusive prefix of x over the block's threads (thread order), and the
// block's sum in `total`. Every thread of the block calls it.
__device__ inline int32_t block_exclusive_scan(int32_t x, int32_t* s_warp_sums, int32_t& total) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  int32_t inclusive = x;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int32_t up = __shfl_up_sync(kFullMask, inclusive, d);
    inclusive += lane >= d ? up : 0;
  }
  if (lane == 31) {
    s_warp_sums[warp] = inclusive;
  }
  __syncthreads();
  int32_t before = 0;
  total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const int32_t sum = s_warp_sums[w];
    before += w < warp ? sum : 0;
    total += sum;
  }
  __syncthreads(); // s_warp_sums is written again by the next call
  return before + inclusive - x;
}

// One roi per block. Scratch (global, int32): list and group rows of
// num_points entries per roi; tables (2 * voxels + 1 per roi) when the voxel
// tables do not fit in shared memory. None of the scratch pointers is
// __restrict__ / read-only: the block writes them and reads them back.
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const scalar_t* __restrict__ rois, const scalar_t* __restrict__ pts,
                   const scalar_t* __restrict__ feats, int64_t num_points, int64_t channels, int64_t voxels,
                   RoIAwarePool3dParams p, bool tables_in_smem, int32_t* point_voxels, int32_t* counts,
                   int32_t* list_scratch, int32_t* group_scratch, int32_t* table_scratch, scalar_t* __restrict__ out,
                   int32_t* __restrict__ argmax) {
  extern __shared__ int32_t s_tables[]; // 2 * voxels + 1 when tables_in_smem
  __shared__ int32_t s_slot[kSlots];
  __shared__ int32_t s_chunk_total;
  __shared__ int32_t s_warp_sums[kWarps];
  __shared__ int32_t s_index[kStage];
  __shared__ int32_t s_voxel[kStage];

  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const unsigned lanes_below = (1u << lane) - 1u;
  const auto box = box3d::Box3d<acc_t>::load(rois + 7 * r);
  int32_t* table = tables_in_smem ? s_tables : table_scratch + r * (2 * voxels + 1);
  int32_t* seen = table;           // [voxels]: in-box points per voxel, then the walk's counters
  int32_t* start = table + voxels; // [voxels + 1]: a voxel's kept points are group[start[v], start[v + 1])
  int32_t* pv = point_voxels + r * num_points;
  int32_t* list = list_scratch + r * num_points; // in-box points, index order
  int32_t* group = group_scratch + r * num_points;

  for (int64_t v = threadIdx.x; v < voxels; v += kThreads) {
    seen[v] = 0;
  }
  __syncthreads();

  // 1. test every point; compact the in-box ones (index order), count them per voxel
  int64_t inside = 0; // in-box points so far, the same in every thread
  for (int64_t base = 0; base < num_points; base += kChunk) {
    acc_t xyz[kPerThread][3];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t i = base + k * kThreads + threadIdx.x;
#pragma unroll
      for (int d = 0; d < 3; ++d) {
        xyz[k][d] = i < num_points ? static_cast<acc_t>(pts[3 * i + d]) : acc_t(0);
      }
    }
    int32_t voxel[kPerThread];
    unsigned ballot[kPerThread];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t i = base + k * kThreads + threadIdx.x;
      int64_t v = -1;
      acc_t lx = 0, ly = 0;
      if (i < num_points && box.contains(xyz[k][0], xyz[k][1], xyz[k][2], lx, ly)) {
        v = roiaware_pool3d_math::voxel_of(box, lx, ly, xyz[k][2], p);
      }
      if (i < num_points) {
        pv[i] = static_cast<int32_t>(v); // kept so far; the walk resets the points it does not keep
      }
      voxel[k] = static_cast<int32_t>(v);
      ballot[k] = __ballot_sync(kFullMask, v >= 0);
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
      if (voxel[k] >= 0) { // slots are ordered (round, warp), lanes by index: the list is in index order
        const int64_t at = inside + s_slot[k * kWarps + warp] + __popc(ballot[k] & lanes_below);
        list[at] = static_cast<int32_t>(base + k * kThreads + threadIdx.x);
        atomicAdd(seen + voxel[k], 1);
      }
    }
    inside += s_chunk_total;
    __syncthreads(); // s_slot and s_chunk_total are written again by the next chunk
  }

  // 2. voxel_counts (capped at max_kept) and the voxels' starts; seen back to 0
  int32_t* roi_counts = counts + r * voxels;
  int32_t carry = 0;
  for (int64_t v0 = 0; v0 < voxels; v0 += int64_t(kThreads) * kScanItems) {
    const int64_t first = v0 + int64_t(threadIdx.x) * kScanItems;
    int32_t kept[kScanItems];
    int32_t sum = 0;
#pragma unroll
    for (int q = 0; q < kScanItems; ++q) {
      const int64_t v = first + q;
      kept[q] = 0;
      if (v < voxels) {
        const int32_t held = seen[v];
        kept[q] = held < p.max_kept ? held : static_cast<int32_t>(p.max_kept);
        seen[v] = 0;
        roi_counts[v] = kept[q];
      }
      sum += kept[q];
    }
    int32_t round_total = 0;
    int32_t run = carry + block_exclusive_scan(sum, s_warp_sums, round_total);
#pragma unroll
    for (int q = 0; q < kScanItems; ++q) {
      if (first + q < voxels) {
        start[first + q] = run;
      }
      run += kept[q];
    }
    carry += round_total;
  }
  if (threadIdx.x == 0) {
    start[voxels] = carry;
  }
  __syncthreads();

  // 3. rank the in-box points in index order (warp 0); place the kept ones
  for (int64_t stage = 0; stage < inside; stage += kStage) {
    const int len = static_cast<int>(inside - stage < kStage ? inside - stage : kStage);
    for (int j = threadIdx.x; j < len; j += kThreads) {
      const int32_t i = list[stage + j];
      s_index[j] = i;
      s_voxel[j] = pv[i];
    }
    __syncthreads();
    if (warp == 0) {
      for (int j0 = 0; j0 < len; j0 += 32) {
        const int j = j0 + lane;
        const int32_t v = j < len ? s_voxel[j] : -1;
        const unsigned peers = __match_any_sync(kFullMask, v);
        const int before = __popc(peers & lanes_below);
        const int32_t held = v >= 0 ? seen[v] : 0;
        __syncwarp();
        if (v >= 0 && before == 0) { // the group's lowest lane advances the voxel's counter
          seen[v] = held + __popc(peers);
        }
        __syncwarp();
        if (v >= 0) {
          const int64_t rank = int64_t(held) + before;
          if (rank < p.max_kept) {
            group[start[v] + rank] = s_index[j];
          } else {
            pv[s_index[j]] = -1;
          }
        }
      }
    }
    __syncthreads(); // s_index / s_voxel are staged again; group is complete after the last stage
  }

  // 4. pool: (voxel, channel) outputs of this roi, channels fastest
  const int64_t cells = voxels * channels;
  if (cells > 0) {
    const bool is_max = p.mode == RoIAwarePoolMode::kMax;
    const int64_t step_v = kThreads / channels, step_c = kThreads % channels;
    int64_t v = threadIdx.x / channels, c = threadIdx.x % channels;
    for (int64_t e = threadIdx.x; e < cells; e += kThreads) {
      roiaware_pool3d_math::pool_voxel<scalar_t, acc_t>(feats, group, start[v], start[v + 1], c, channels, is_max,
                                                        r * cells + e, out, argmax);
      c += step_c;
      v += step_v;
      if (c >= channels) {
        c -= channels;
        ++v;
      }
    }
  }
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kBackwardThreads)
    backward_kernel(const scalar_t* __restrict__ grad_out, const int32_t* __restrict__ argmax,
                    const int32_t* __restrict__ point_voxels, const int32_t* __restrict__ counts, int64_t num_rois,
                    int64_t num_points, int64_t voxels, int64_t channels, RoIAwarePoolMode mode,
                    scalar_t* __restrict__ grad_in) {
  const int64_t total = num_points * channels;
  for (int64_t e = int64_t(blockIdx.x) * kBackwardThreads + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * kBackwardThreads) {
    const int64_t i = e / channels;
    grad_in[e] = static_cast<scalar_t>(roiaware_pool3d_math::point_gradient<scalar_t, acc_t>(
        i, e - i * channels, num_rois, num_points, voxels, channels, grad_out, argmax, point_voxels, counts, mode));
  }
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> roiaware_pool3d_forward_cuda(const at::Tensor& rois,
                                                                                        const at::Tensor& pts,
                                                                                        const at::Tensor& pts_feature,
                                                                                        const RoIAwarePool3dParams& p) {
  const c10::cuda::CUDAGuard guard(pts_feature.device());
  const at::Tensor boxes = rois.contiguous();
  const at::Tensor points = pts.contiguous();
  const at::Tensor feats = pts_feature.contiguous();
  const int64_t n = boxes.size(0), num_points = points.size(0), c = feats.size(1);
  const int64_t voxels = p.out_x * p.out_y * p.out_z;
  const bool is_max = p.mode == RoIAwarePoolMode::kMax;
  at::Tensor pooled, argmax, point_voxels, counts; // captured by the dispatch lambda below
  // every element is written by the kernel: voxel_counts needs no zeroing
  std::tie(pooled, argmax, point_voxels, counts) = roiaware_pool3d_outputs(n, feats, p, /*zero_counts=*/false);
  if (n == 0) {
    return {pooled, argmax, point_voxels, counts};
  }
  TORCH_CHECK(n <= std::numeric_limits<int32_t>::max(), "mmops::roiaware_pool3d: ", n,
              " rois are more than one CUDA launch covers");
  const bool tables_in_smem = voxels <= kSmemVoxels;
  const int64_t table_ints = 2 * voxels + 1;
  // one allocation: in-box list and group rows (n * P each), then the voxel tables if global
  at::Tensor scratch = at::empty({2 * n * num_points + (tables_in_smem ? 0 : n * table_ints)}, point_voxels.options());
  int32_t* list = scratch.mutable_data_ptr<int32_t>();
  int32_t* group = list + n * num_points;
  int32_t* tables = group + n * num_points;
  const size_t smem = tables_in_smem ? static_cast<size_t>(table_ints) * sizeof(int32_t) : 0;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "mmops::roiaware_pool3d (CUDA)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    forward_kernel<scalar_t, acc_t><<<static_cast<unsigned>(n), kThreads, smem, stream>>>(
        boxes.const_data_ptr<scalar_t>(), points.const_data_ptr<scalar_t>(), feats.const_data_ptr<scalar_t>(),
        num_points, c, voxels, p, tables_in_smem, point_voxels.mutable_data_ptr<int32_t>(),
        counts.mutable_data_ptr<int32_t>(), list, group, tables, pooled.mutable_data_ptr<scalar_t>(),
        is_max ? argmax.mutable_data_ptr<int32_t>() : nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {pooled, argmax, point_voxels, counts};
}

at::Tensor roiaware_pool3d_backward_cuda(const at::Tensor& grad_out, const at::Tensor& argmax,
                                         const at::Tensor& point_voxels, const at::Tensor& voxel_counts,
                                         const RoIAwarePool3dParams& p) {
  const c10::cuda::CUDAGuard guard(grad_out.device());
  const at::Tensor grad = grad_out.contiguous();
  const at::Tensor am = argmax.contiguous();
  const at::Tensor pv = point_voxels.contiguous();
  const at::Tensor counts = voxel_counts.contiguous();
  const int64_t n = pv.size(0), num_points = pv.size(1), c = grad.size(4);
  at::Tensor grad_in = at::empty({num_points, c}, grad.options());
  if (grad_in.numel() == 0) {
    return grad_in;
  }
  const int64_t blocks = std::min<int64_t>((grad_in.numel() + kBackwardThreads - 1) / kBackwardThreads, kMaxBlocks);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::roiaware_pool3d backward (CUDA)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        backward_kernel<scalar_t, acc_t><<<static_cast<unsigned>(blocks), kBackwardThreads, 0, stream>>>(
            grad.const_data_ptr<scalar_t>(), p.mode == RoIAwarePoolMode::kMax ? am.const_data_ptr<int32_t>() : nullptr,
            pv.const_data_ptr<int32_t>(), counts.const_data_ptr<int32_t>(), n, num_points, p.out_x * p.out_y * p.out_z,
            c, p.mode, grad_in.mutable_data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return grad_in;
}

} // namespace kernels
} // namespace mmops
