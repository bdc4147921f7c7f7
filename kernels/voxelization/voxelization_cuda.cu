// CUDA kernels of dynamic_voxelize, hard_voxelize and dynamic_scatter.
//
// dynamic_voxelize: one thread per point.
// hard_voxelize, deterministic without atomics (mmcv's deterministic mode
// compares every point with all earlier ones, O(N^2)):
//   1. key of every point (voxel_key; the grid's voxel count when out of range);
//   2. a stable radix sort of the keys over the bits the grid needs: the points
//      of a voxel are one run of sorted positions, in input order; a run's
//      first position holds the voxel's first point;
//   3. heads: flag the first position of every run, and the first point of
//      every run in input order; a cumsum of the run flags numbers the runs and
//      the head of run r records its position in run_start[r];
//   4. an inclusive cumsum of the first-point flags in input order numbers the
//      voxels by their first point: mmcv's order. M = min(voxels, max_voxels)
//      is read on the host (the only sync: the output size);
//   5. one thread per sorted position copies its point to (voxel, place in
//      run) when both are kept; a run's first thread writes the coordinates,
//      the thread of its last kept place the count.
// dynamic_scatter: the rows of coors packed into one key (the bits of each
// column's maximum; two syncs: the maxima and the voxel count), the same radix
// sort and run numbering; keys wider than 62 bits take group_by_coordinates
// (ATen sorts). Then one thread per (voxel, channel) reduces the voxel's points
// in index order; backward, one thread per (point, channel). Sums run in a
// fixed order: CUDA == CPU.

#include "voxelization/voxelization_kernels.h"

#include "common/radix_sort.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sub.h>
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

int64_t blocks_for(int64_t n) {
  return std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks);
}

#define MMOPS_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// zyx (coors != nullptr) and/or the key (key != nullptr) of every point.
template <typename scalar_t>
__global__ void voxelize_kernel(const scalar_t* __restrict__ points, int64_t n, int64_t ndim, VoxelGrid grid,
                                int64_t out_of_range, int32_t* __restrict__ coors, int64_t* __restrict__ key) {
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
      key[i] = in_range ? voxelization::voxel_key(zyx, grid) : out_of_range;
    }
  }
}

// Step 3: is_head[i] = 1 at the first position of every run of kept keys
// (keys below `dropped`), first[point] = 1 for the run's first point.
__global__ void run_heads_kernel(const int64_t* __restrict__ key, const int64_t* __restrict__ perm, int64_t n,
                                 int64_t dropped, int32_t* __restrict__ is_head, int32_t* __restrict__ first) {
  MMOPS_GRID_STRIDE(i, n) {
    const bool head = key[i] < dropped && (i == 0 || key[i] != key[i - 1]);
    is_head[i] = head ? 1 : 0;
    if (first != nullptr && head) {
      first[perm[i]] = 1;
    }
  }
}

// run_start[r] = the position of run r's head (run_id: inclusive cumsum of is_head).
__global__ void run_starts_kernel(const int32_t* __restrict__ is_head, const int64_t* __restrict__ run_id, int64_t n,
                                  int64_t* __restrict__ run_start) {
  MMOPS_GRID_STRIDE(i, n) {
    if (is_head[i] != 0) {
      run_start[run_id[i] - 1] = i;
    }
  }
}

// Step 5.
template <typename scalar_t>
__global__ void fill_voxels_kernel(const scalar_t* __restrict__ points, const int64_t* __restrict__ key,
                                   const int64_t* __restrict__ perm, const int64_t* __restrict__ run_id,
                                   const int64_t* __restrict__ run_start, const int64_t* __restrict__ voxel_rank,
                                   int64_t n, int64_t ndim, VoxelGrid grid, int64_t dropped, int64_t max_points,
                                   int64_t voxels, scalar_t* __restrict__ out, int32_t* __restrict__ coors,
                                   int32_t* __restrict__ count) {
  MMOPS_GRID_STRIDE(i, n) {
    if (key[i] >= dropped) {
      continue;
    }
    const int64_t start = run_start[run_id[i] - 1];
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

// dynamic_scatter's row keys: the columns of a row side by side (column j at
// shift[j], the first column highest), so keys order rows lexicographically; a
// row with a negative value gets `dropped`, above every kept key.
constexpr int kMaxKeyColumns = 8;
struct RowKeyLayout {
  int columns;
  int shift[kMaxKeyColumns];
  int64_t dropped;
};

__global__ void row_keys_kernel(const int32_t* __restrict__ coors, int64_t n, RowKeyLayout layout,
                                int64_t* __restrict__ key) {
  MMOPS_GRID_STRIDE(i, n) {
    const int32_t* row = coors + i * layout.columns;
    int64_t k = 0;
    bool kept = true;
    for (int j = 0; j < layout.columns; ++j) {
      kept = kept && row[j] >= 0;
      k |= static_cast<int64_t>(row[j] > 0 ? row[j] : 0) << layout.shift[j];
    }
    key[i] = kept ? k : layout.dropped;
  }
}

// The groups from the sorted keys: voxel v = voxel_id - 1 of every kept
// position; a run's head writes starts[v] and the voxel's row, the last kept
// position starts[voxels].
__global__ void voxel_groups_kernel(const int64_t* __restrict__ sorted, const int64_t* __restrict__ perm,
                                    const int32_t* __restrict__ is_head, const int64_t* __restrict__ voxel_id,
                                    const int32_t* __restrict__ coors, int64_t n, int64_t columns, int64_t dropped,
                                    int64_t voxels, int32_t* __restrict__ point2voxel, int64_t* __restrict__ starts,
                                    int32_t* __restrict__ voxel_coors) {
  MMOPS_GRID_STRIDE(i, n) {
    const int64_t p = perm[i];
    if (sorted[i] >= dropped) {
      point2voxel[p] = -1;
      continue;
    }
    const int64_t v = voxel_id[i] - 1;
    point2voxel[p] = static_cast<int32_t>(v);
    if (is_head[i] != 0) {
      starts[v] = i;
      for (int64_t j = 0; j < columns; ++j) {
        voxel_coors[v * columns + j] = coors[p * columns + j];
      }
    }
    if (i + 1 == n || sorted[i + 1] >= dropped) {
      starts[voxels] = i + 1;
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
        points.const_data_ptr<scalar_t>(), n, points.size(1), grid, 0, coors.mutable_data_ptr<int32_t>(), nullptr);
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
  const VoxelGrid& grid = params.grid;
  // keys in [0, volume]; volume marks a point out of range (the product is checked to fit)
  const int64_t volume = int64_t(grid.cells[0]) * grid.cells[1] * grid.cells[2];
  at::Tensor key = at::empty({n}, points.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::hard_voxelize keys", [&] {
    voxelize_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(points.const_data_ptr<scalar_t>(), n, ndim, grid,
                                                                      volume, nullptr, key.mutable_data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  const auto [sorted_key, perm] = stable_sort_small_keys(key, key_bits(static_cast<uint64_t>(volume)));
  at::Tensor first = at::zeros({n}, int_options);
  at::Tensor is_head = at::empty({n}, int_options);
  run_heads_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      sorted_key.const_data_ptr<int64_t>(), perm.const_data_ptr<int64_t>(), n, volume,
      is_head.mutable_data_ptr<int32_t>(), first.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor run_id = at::cumsum(is_head, 0, at::kLong);
  at::Tensor run_start = at::empty({n}, key.options());
  run_starts_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      is_head.const_data_ptr<int32_t>(), run_id.const_data_ptr<int64_t>(), n, run_start.mutable_data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor voxel_rank = at::cumsum(first, 0, at::kLong);
  const int64_t m = std::min(voxel_rank[n - 1].item<int64_t>(), params.max_voxels); // sync: the output size

  at::Tensor voxels = at::zeros({m, params.max_points, ndim}, points.options());
  at::Tensor coors = at::empty({m, 3}, int_options);
  at::Tensor count = at::empty({m}, int_options);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::hard_voxelize fill", [&] {
    fill_voxels_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(
        points.const_data_ptr<scalar_t>(), sorted_key.const_data_ptr<int64_t>(), perm.const_data_ptr<int64_t>(),
        run_id.const_data_ptr<int64_t>(), run_start.const_data_ptr<int64_t>(), voxel_rank.const_data_ptr<int64_t>(), n,
        ndim, grid, volume, params.max_points, m, voxels.mutable_data_ptr<scalar_t>(),
        coors.mutable_data_ptr<int32_t>(), count.mutable_data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {voxels, coors, count};
}

namespace {

// group_by_coordinates on the GPU (VoxelGroups; order holds the dropped points
// after the kept ones). Two syncs: the column maxima, the voxel count.
VoxelGroups group_by_coordinates_cuda(const at::Tensor& coors_in) {
  const at::Tensor coors = coors_in.contiguous();
  const int64_t n = coors.size(0);
  const int64_t columns = coors.size(1);
  if (n == 0 || columns > kMaxKeyColumns) {
    return group_by_coordinates(coors);
  }
  const at::Tensor maxima = at::amax(coors, 0).cpu(); // sync
  RowKeyLayout layout{};
  layout.columns = static_cast<int>(columns);
  int total = 0;
  for (int64_t j = columns - 1; j >= 0; --j) {
    const int32_t top = maxima.const_data_ptr<int32_t>()[j];
    layout.shift[j] = total;
    total += top > 0 ? key_bits(static_cast<uint64_t>(top)) : 0;
  }
  if (total > 62) { // the key and its `dropped` mark need total + 1 <= 63 bits
    return group_by_coordinates(coors);
  }
  layout.dropped = int64_t(1) << total;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const auto long_options = coors.options().dtype(at::kLong);
  at::Tensor key = at::empty({n}, long_options);
  row_keys_kernel<<<blocks_for(n), kThreads, 0, stream>>>(coors.const_data_ptr<int32_t>(), n, layout,
                                                          key.mutable_data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const auto [sorted, perm] = stable_sort_small_keys(key, total + 1);
  at::Tensor is_head = at::empty({n}, coors.options());
  run_heads_kernel<<<blocks_for(n), kThreads, 0, stream>>>(sorted.const_data_ptr<int64_t>(),
                                                           perm.const_data_ptr<int64_t>(), n, layout.dropped,
                                                           is_head.mutable_data_ptr<int32_t>(), nullptr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor voxel_id = at::cumsum(is_head, 0, at::kLong);
  const int64_t m = voxel_id[n - 1].item<int64_t>(); // sync: the output size
  at::Tensor point2voxel = at::empty({n}, coors.options());
  at::Tensor starts = at::zeros({m + 1}, long_options);
  at::Tensor voxel_coors = at::empty({m, columns}, coors.options());
  voxel_groups_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      sorted.const_data_ptr<int64_t>(), perm.const_data_ptr<int64_t>(), is_head.const_data_ptr<int32_t>(),
      voxel_id.const_data_ptr<int64_t>(), coors.const_data_ptr<int32_t>(), n, columns, layout.dropped, m,
      point2voxel.mutable_data_ptr<int32_t>(), starts.mutable_data_ptr<int64_t>(),
      voxel_coors.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor counts = at::sub(starts.slice(0, 1), starts.slice(0, 0, m)).to(at::kInt);
  return {perm, starts, point2voxel, counts, voxel_coors};
}

} // namespace

ScatterResult dynamic_scatter_forward_cuda(const at::Tensor& feats_in, const at::Tensor& coors, ScatterReduce reduce) {
  const c10::cuda::CUDAGuard guard(feats_in.device());
  const at::Tensor feats = feats_in.contiguous();
  const VoxelGroups groups = group_by_coordinates_cuda(coors);
  ScatterResult r = plan_scatter(feats, reduce, groups);
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
