// CPU kernels of dynamic_voxelize, hard_voxelize and dynamic_scatter.
//
// hard_voxelize: the voxel of every point in parallel, then one pass in input
// order (a hash map from voxel to its slot) assigns the voxels in the order of
// their first point and each point its place, then the points are copied in
// parallel. dynamic_scatter: group_by_coordinates, then one task per voxel.

#include "voxelization/voxelization_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace mmops {
namespace kernels {
namespace {

constexpr int64_t kPointGrain = 4096;

// zyx of every point (-1 rows out of range) into coors [N, 3].
void voxelize_points(const at::Tensor& points, const VoxelGrid& grid, int32_t* coors) {
  const int64_t n = points.size(0);
  const int64_t ndim = points.size(1);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::voxelize (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* p = points.const_data_ptr<scalar_t>();
    at::parallel_for(0, n, kPointGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int32_t* zyx = coors + 3 * i;
        if (!voxelization::point_voxel<acc_t>(p + i * ndim, grid, zyx)) {
          zyx[0] = zyx[1] = zyx[2] = -1;
        }
      }
    });
  });
}

} // namespace

at::Tensor dynamic_voxelize_cpu(const at::Tensor& points_in, const VoxelGrid& grid) {
  const at::Tensor points = points_in.contiguous();
  at::Tensor coors = at::empty({points.size(0), 3}, points.options().dtype(at::kInt));
  voxelize_points(points, grid, coors.mutable_data_ptr<int32_t>());
  return coors;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> hard_voxelize_cpu(const at::Tensor& points_in,
                                                                 const HardVoxelizeParams& params) {
  const at::Tensor points = points_in.contiguous();
  const int64_t n = points.size(0);
  const int64_t ndim = points.size(1);
  std::vector<int32_t> zyx(3 * n);
  voxelize_points(points, params.grid, zyx.data());

  // In input order: voxel of each point (-1: dropped) and its place in the voxel.
  std::vector<int64_t> voxel(n, -1);
  std::vector<int64_t> place(n, 0);
  std::vector<int64_t> first_point;
  std::vector<int32_t> count;
  std::unordered_map<int64_t, int64_t> slot_of_key; // -1: a voxel past max_voxels
  for (int64_t i = 0; i < n; ++i) {
    if (zyx[3 * i] < 0) {
      continue;
    }
    const int64_t key = voxelization::voxel_key(&zyx[3 * i], params.grid);
    const int64_t next = static_cast<int64_t>(first_point.size());
    const auto [it, added] = slot_of_key.try_emplace(key, next < params.max_voxels ? next : -1);
    if (added && it->second >= 0) {
      first_point.push_back(i);
      count.push_back(0);
    }
    const int64_t v = it->second;
    if (v >= 0 && count[v] < params.max_points) {
      voxel[i] = v;
      place[i] = count[v]++;
    }
  }

  const int64_t m = static_cast<int64_t>(first_point.size());
  at::Tensor voxels = at::zeros({m, params.max_points, ndim}, points.options());
  at::Tensor coors = at::empty({m, 3}, points.options().dtype(at::kInt));
  at::Tensor num = at::empty({m}, points.options().dtype(at::kInt));
  int32_t* c = coors.mutable_data_ptr<int32_t>();
  int32_t* k = num.mutable_data_ptr<int32_t>();
  for (int64_t v = 0; v < m; ++v) {
    for (int a = 0; a < 3; ++a) {
      c[3 * v + a] = zyx[3 * first_point[v] + a];
    }
    k[v] = count[v];
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, points.scalar_type(), "mmops::hard_voxelize (CPU)", [&] {
    const scalar_t* p = points.const_data_ptr<scalar_t>();
    scalar_t* out = voxels.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, n, kPointGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (voxel[i] >= 0) {
          std::copy(p + i * ndim, p + (i + 1) * ndim, out + (voxel[i] * params.max_points + place[i]) * ndim);
        }
      }
    });
  });
  return {voxels, coors, num};
}

ScatterResult dynamic_scatter_forward_cpu(const at::Tensor& feats_in, const at::Tensor& coors, ScatterReduce reduce) {
  const at::Tensor feats = feats_in.contiguous();
  const VoxelGroups groups = group_by_coordinates(coors);
  ScatterResult r = plan_scatter(feats, reduce, groups);
  const int64_t m = r.voxel_feats.size(0);
  const int64_t channels = feats.size(1);
  const int64_t* order = groups.order.const_data_ptr<int64_t>();
  const int64_t* starts = groups.starts.const_data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "mmops::dynamic_scatter (CPU)", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* f = feats.const_data_ptr<scalar_t>();
    scalar_t* out = r.voxel_feats.mutable_data_ptr<scalar_t>();
    int32_t* argmax = reduce == ScatterReduce::Max ? r.argmax.mutable_data_ptr<int32_t>() : nullptr;
    const int64_t grain = std::max<int64_t>(1, 2048 / std::max<int64_t>(channels, 1));
    at::parallel_for(0, m, grain, [&](int64_t begin, int64_t end) {
      for (int64_t v = begin; v < end; ++v) {
        for (int64_t c = 0; c < channels; ++c) {
          const int64_t at = v * channels + c;
          voxelization::reduce_voxel_channel<scalar_t, acc_t>(f, channels, order, starts[v], starts[v + 1], c, reduce,
                                                              out + at, argmax != nullptr ? argmax + at : nullptr);
        }
      }
    });
  });
  return r;
}

at::Tensor dynamic_scatter_backward_cpu(const at::Tensor& grad_in, const at::Tensor& point2voxel_in,
                                        const at::Tensor& count_in, const at::Tensor& argmax_in, ScatterReduce reduce) {
  const at::Tensor grad = grad_in.contiguous();
  const at::Tensor point2voxel = point2voxel_in.contiguous();
  const at::Tensor count = count_in.contiguous();
  const at::Tensor argmax = argmax_in.contiguous();
  const int64_t n = point2voxel.size(0);
  const int64_t m = grad.size(0);
  const int64_t channels = grad.size(1);
  at::Tensor grad_feats = at::empty({n, channels}, grad.options());
  const int32_t* p2v = point2voxel.const_data_ptr<int32_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "mmops::dynamic_scatter backward (CPU)", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* g = grad.const_data_ptr<scalar_t>();
        scalar_t* out = grad_feats.mutable_data_ptr<scalar_t>();
        at::parallel_for(0, n, kPointGrain, [&](int64_t begin, int64_t end) {
          for (int64_t p = begin; p < end; ++p) {
            for (int64_t c = 0; c < channels; ++c) {
              out[p * channels + c] = voxelization::point_grad<scalar_t, acc_t>(g, count.const_data_ptr<int32_t>(),
                                                                                argmax.const_data_ptr<int32_t>(), m,
                                                                                channels, p, p2v[p], c, reduce);
            }
          }
        });
      });
  return grad_feats;
}

} // namespace kernels
} // namespace mmops
