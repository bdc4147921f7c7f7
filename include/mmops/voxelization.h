#pragma once
// Public C++ API of mmops::hard_voxelize, dynamic_voxelize and dynamic_scatter
// (mmcv's Voxelization and DynamicScatter). Calls go through the PyTorch
// dispatcher, like torch.ops.mmops.* from Python.
//
// points: [N, ndim >= 3] (x, y, z, extra features), float/double/half/bfloat16.
// voxel_size: (x, y, z); coors_range: (x_min, y_min, z_min, x_max, y_max,
// z_max), both used as float32 (mmcv's parameters). The voxel of a point along
// an axis is floor((p - min) / size), in range when in [0, round((max - min) /
// size)); NaN/Inf coordinates are out of range. Voxel coordinates are int32
// (z, y, x).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <tuple>

namespace mmops {

// The voxel of every point: coors [N, 3] int32 (z, y, x), a row of -1 for a
// point out of range. Not differentiable.
at::Tensor dynamic_voxelize(const at::Tensor& points, at::ArrayRef<double> voxel_size,
                            at::ArrayRef<double> coors_range);

// Hard voxelization, always deterministic (mmcv's deterministic=True order):
// voxels in the order of their first point, the points of a voxel in input
// order; points past max_points in a voxel and voxels past max_voxels are
// dropped. Returns (voxels [M, max_points, ndim] zero-padded, coors [M, 3]
// int32, num_points_per_voxel [M] int32). Not differentiable.
std::tuple<at::Tensor, at::Tensor, at::Tensor> hard_voxelize(const at::Tensor& points, at::ArrayRef<double> voxel_size,
                                                             at::ArrayRef<double> coors_range, int64_t max_points = 35,
                                                             int64_t max_voxels = 20000);

// Reduces the features [N, C] of the points that share voxel coordinates
// (coors [N, D] int32; a row with a negative value is dropped) with "sum",
// "mean" or "max". Returns (voxel_feats [M, C], voxel_coors [M, D] int32), the
// voxels in increasing lexicographic order of their coordinates. Max: NaN
// propagates; the gradient goes to the point of the maximum, the lowest index
// on ties. Differentiable in feats.
std::tuple<at::Tensor, at::Tensor> dynamic_scatter(const at::Tensor& feats, const at::Tensor& coors,
                                                   c10::string_view reduce = "max");

} // namespace mmops
