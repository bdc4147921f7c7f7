// CUDA kernels of dynamic_voxelize, hard_voxelize and dynamic_scatter.
//
// dynamic_voxelize: one thread per point.
// hard_voxelize, deterministic without atomics (mmcv's deterministic mode
// compares every point with all earlier ones, O(N^2)):
//   1. key of every point (voxel_key, the largest int64 when out of range);
//   2. a stable sort of the keys: the points of a voxel are one run of sorted
//      positions, in input order; a run's first position holds the voxel's
//      first point;
//   3. heads: flag the first point of every run (in input order) and, per
//      sorted position, the start of its run (cummax of head positions);
//   4. an inclusive cumsum of the first-point flags in input order numbers the
//      voxels by their first point: mmcv's order. M = min(voxels, max_voxels)
//      is read on the host (the only sync: the output size);
//   5. one thread per sorted position copies its point to (voxel, place in
//      run) when both are kept; a run's first thread writes the coordinates,
//      the thread of its last kept place the count.
// dynamic_scatter: group_by_coordinates (ATen sorts), then one thread per
// (voxel, channel) reduces the voxel's points in index order; backward, one
// thread per (point, channel). Sums run in a fixed order: CUDA == CPU.

#include "voxelization/voxelization_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/cummax.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sort.h>
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
constexpr int64_t kMaxBlocks = int64_t(1) << 20; // grid-stride loops beyond
constexpr int64_t kOutOfRange = std::numeric_limits<int64_t>::max();

int64_t blocks_for(int64_t n) {
  return std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks);
}

#define MMOPS_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// zyx (coors != nullptr) and/or the key (key != nullptr) of every point.
template <typename scalar_t>
__global__ void voxelize_kernel(const scalar_t* __restrict__ points, int64_t n, int64_t ndim, VoxelGrid grid,
                                int32_t* __restrict__ coors, int64_t* __restrict__ key) {
  using acc_t = at::opmath_type<scalar_t>;
  MMOPS_GRID_STRIDE(i, n) {
    int32_t zyx[3] = {-1, -1, -1};
    const bool in_range = voxelization::point_voxel<acc_t>(points + i * ndim, grid, zyx);
    if (coors != nullptr) {
      coors[3 * i] = zyx[0];
      coors[3 * i + 1] = zyx[1];
      coors[3 * i + 2] = zyx[2];
    }
    if (key != nullptr) {
      key[i] = in_range ? voxelization::voxel_key(zyx, grid) : kOutOfRange;
    }
  }
}

// Step 3: first[point] = 1 for the first point of every run; head_at[i] = i at
// a run's first position, else 0 (its cummax is the start of i's run).
__global__ void run_heads_kernel(const int64_t* __restrict__ key, const int64_t* __restrict__ perm, int64_t n,
                                 int32_t* __restrict__ first, int64_t* __restrict__ head_at) {
  MMOPS_GRID_STRIDE(i, n) {
    const bool head = key[i] != kOutOfRange && (i == 0 || key[i] != key[i - 1]);
    head_at[i] = head ? i : 0;
    if (head) {
      first[perm[i]] = 1;
    }
  }
}

// Step 5.
template <typename scalar_t>
__global__ void fill_voxels_kernel(const scalar_t* __restrict__ points, const int64_t* __restrict__ key,
                                   const int64_t* __restrict__ perm, const int64_t* __restrict__ run_start,
                                   const int64_t* __restrict__ voxel_rank, int64_t n, int64_t ndim, VoxelGrid grid,
                                   int64_t max_points, int64_t voxels, scalar_t* __restrict__ out,
                                   int32_t* __restrict__ coors, int32_t* __restrict__ count) {
  MMOPS_GRID_STRIDE(i, n) {
    if (key[i] == kOutOfRange) {
      continue;
    }
    const int64_t start = run_start[i];
    const int64_t place = i - start;
    const int64_t v = voxel_rank[perm[start]] - 1;
    if (v >= voxels || place >= max_points) {
      continue;
    }
    const scalar_t* src = points + perm[i] * ndim;
    scalar_t* dst = out + (v * max_points + place) * ndim;
    for (int64_t k = 0; k < ndim; ++k) {
      dst[k] = src[k];
    }
    if (place == 0) {
      voxelization::voxel_of_key(key[i], grid, coors + 3 * v);
    }
    if (place == max_points - 1 || i + 1 == n || key[i + 1] != key[i]) {
      count[v] = static_cast<int32_t>(place + 1);
    }
  }
}

template <typename scalar_t>
__global__ void scatter_forward_kernel(const scalar_t* __restrict__ feats, const int64_t* __restrict__ order,
                                       const int64_t* __restrict__ starts, int64_t voxels, int64_t channels,
                                       ScatterReduce reduce, scalar_t* __restrict__ out, int32_t* __restrict__ argmax) {
  using acc_t = at::opmath_type<scalar_t>;
  MMOPS_GRID_STRIDE(i, voxels * channels) {
    const int64_t v = i / channels;
    voxelization::reduce_voxel_channel<scalar_t, acc_t>(feats, channels, order, starts[v], starts[v + 1],
                                                        i - v * channels, reduce, out + i,
                                                        reduce == ScatterReduce::Max ? argmax + i : nullptr);
  }
}

template <typename scalar_t>
__global__ void scatter_backward_kernel(const scalar_t* __restrict__ grad, const int32_t* __restrict__ point2voxel,
                                        const int32_t* __restrict__ count, const int32_t* __restrict__ argmax,
                                        int64_t points, int64_t voxels, int64_t channels, ScatterReduce reduce,
                                        scalar_t* __restrict__ out) {
  using acc_t = at::opmath_type<scalar_t>;
  MMOPS_GRID_STRIDE(i, points * channels) {
    const int64_t p = i / channels;
    out[i] = voxelization::point_grad<scalar_t, acc_t>(grad, count, argmax, voxels, channels, p, point2voxel[p],
                                                       i - p * channels, reduce);
  }
}

} // namespace

at::Tensor dynamic_voxelize_cuda(const at::Tensor& points_in, const VoxelGrid& grid) {
  const c10::cuda::CUDAGuard guard(points_in.device());
  const at::Tensor points = points_in.contiguous();
  const int64_t n = points.size(0);
  at::Tensor coors = at::empty({n, 3}, points.options().dtype(at::kInt));
  if (n == 0) {
    return coors;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::dynamic_voxelize", [&] {
    voxelize_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(
        points.const_data_ptr<scalar_t>(), n, points.size(1), grid, coors.mutable_data_ptr<int32_t>(), nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return coors;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> hard_voxelize_cuda(const at::Tensor& points_in,
                                                                  const HardVoxelizeParams& params) {
  const c10::cuda::CUDAGuard guard(points_in.device());
  const at::Tensor points = points_in.contiguous();
  const int64_t n = points.size(0);
  const int64_t ndim = points.size(1);
  const auto int_options = points.options().dtype(at::kInt);
  if (n == 0) {
    return {at::zeros({0, params.max_points, ndim}, points.options()), at::empty({0, 3}, int_options),
            at::empty({0}, int_options)};
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor key = at::empty({n}, points.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::hard_voxelize keys", [&] {
    voxelize_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(
        points.const_data_ptr<scalar_t>(), n, ndim, params.grid, nullptr, key.mutable_data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  const auto [sorted_key, perm] = at::sort(key, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  at::Tensor first = at::zeros({n}, int_options);
  at::Tensor head_at = at::empty({n}, key.options());
  run_heads_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      sorted_key.const_data_ptr<int64_t>(), perm.const_data_ptr<int64_t>(), n, first.mutable_data_ptr<int32_t>(),
      head_at.mutable_data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor run_start = std::get<0>(at::cummax(head_at, 0));
  const at::Tensor voxel_rank = at::cumsum(first, 0, at::kLong);
  const int64_t m = std::min(voxel_rank[n - 1].item<int64_t>(), params.max_voxels); // sync: the output size

  at::Tensor voxels = at::zeros({m, params.max_points, ndim}, points.options());
  at::Tensor coors = at::empty({m, 3}, int_options);
  at::Tensor count = at::empty({m}, int_options);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::hard_voxelize fill", [&] {
    fill_voxels_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(
        points.const_data_ptr<scalar_t>(), sorted_key.const_data_ptr<int64_t>(), perm.const_data_ptr<int64_t>(),
        run_start.const_data_ptr<int64_t>(), voxel_rank.const_data_ptr<int64_t>(), n, ndim, params.grid,
        params.max_points, m, voxels.mutable_data_ptr<scalar_t>(), coors.mutable_data_ptr<int32_t>(),
        count.mutable_data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {voxels, coors, count};
}

ScatterResult dynamic_scatter_forward_cuda(const at::Tensor& feats_in, const at::Tensor& coors, ScatterReduce reduce) {
  const c10::cuda::CUDAGuard guard(feats_in.device());
  const at::Tensor feats = feats_in.contiguous();
  VoxelGroups groups;
  ScatterResult r = plan_scatter(feats, coors, reduce, groups);
  const int64_t m = r.voxel_feats.size(0);
  const int64_t channels = feats.size(1);
  if (m * channels == 0) {
    return r;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "mmops::dynamic_scatter", [&] {
    scatter_forward_kernel<scalar_t><<<blocks_for(m * channels), kThreads, 0, stream>>>(
        feats.const_data_ptr<scalar_t>(), groups.order.const_data_ptr<int64_t>(),
        groups.starts.const_data_ptr<int64_t>(), m, channels, reduce, r.voxel_feats.mutable_data_ptr<scalar_t>(),
        r.argmax.mutable_data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return r;
}

at::Tensor dynamic_scatter_backward_cuda(const at::Tensor& grad_in, const at::Tensor& point2voxel_in,
                                         const at::Tensor& count_in, const at::Tensor& argmax_in,
                                         ScatterReduce reduce) {
  const c10::cuda::CUDAGuard guard(grad_in.device());
  const at::Tensor grad = grad_in.contiguous();
  const at::Tensor point2voxel = point2voxel_in.contiguous();
  const at::Tensor count = count_in.contiguous();
  const at::Tensor argmax = argmax_in.contiguous();
  const int64_t n = point2voxel.size(0);
  const int64_t channels = grad.size(1);
  at::Tensor grad_feats = at::empty({n, channels}, grad.options());
  if (n * channels == 0) {
    return grad_feats;
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::dynamic_scatter backward", [&] {
    scatter_backward_kernel<scalar_t><<<blocks_for(n * channels), kThreads, 0, stream>>>(
        grad.const_data_ptr<scalar_t>(), point2voxel.const_data_ptr<int32_t>(), count.const_data_ptr<int32_t>(),
        argmax.const_data_ptr<int32_t>(), n, grad.size(0), channels, reduce, grad_feats.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad_feats;
}

} // namespace kernels
} // namespace mmops
