#pragma once
// Device kernels of hard_voxelize, dynamic_voxelize and dynamic_scatter. Callers
// (src/voxelization) validate the arguments first; these functions only compute.
// Points are [N, ndim] (x, y, z, extra features...), voxel coordinates int32
// (z, y, x). Every result is deterministic: no atomics decide an order.

#include "voxelization/voxelization_math.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

struct HardVoxelizeParams {
  VoxelGrid grid;
  int64_t max_points;
  int64_t max_voxels;
};

// What dynamic_scatter's forward returns and its backward needs.
struct ScatterResult {
  at::Tensor voxel_feats;        // [M, C]
  at::Tensor voxel_coors;        // [M, D] int32, rows in increasing lexicographic order
  at::Tensor point2voxel;        // [N] int32, -1 for a dropped point
  at::Tensor voxel_points_count; // [M] int32
  at::Tensor argmax;             // [M, C] int32 point of the maximum (max), else [0, C]
};

namespace kernels {

// The points of every voxel: coors [N, D] int32, rows with a negative value
// dropped. order [V] int64: the V kept points by voxel (increasing rows), then
// by point index; starts [M + 1] int64: voxel v owns
// order[starts[v], starts[v + 1]);
// point2voxel [N] int32; counts [M] int32; voxel_coors [M, D] int32. ATen ops
// on the tensors' device (one host sync: M): the CPU's grouping, and the
// CUDA one for rows too wide for its packed keys.
struct VoxelGroups {
  at::Tensor order;
  at::Tensor starts;
  at::Tensor point2voxel;
  at::Tensor counts;
  at::Tensor voxel_coors;
};
VoxelGroups group_by_coordinates(const at::Tensor& coors);

// dynamic_scatter's forward before the reduction: the result with voxel_feats
// and argmax allocated (not filled) for feats [N, C] (contiguous), the rest
// taken from the groups of coors.
ScatterResult plan_scatter(const at::Tensor& feats, ScatterReduce reduce, const VoxelGroups& groups);

// coors [N, 3] int32 (z, y, x), a row of -1 for a point out of range.
at::Tensor dynamic_voxelize_cpu(const at::Tensor& points, const VoxelGrid& grid);

// (voxels [M, max_points, ndim], coors [M, 3] int32, num_points_per_voxel [M]
// int32): voxels in the order of their first point, points in input order,
// points past max_points and voxels past max_voxels dropped.
std::tuple<at::Tensor, at::Tensor, at::Tensor> hard_voxelize_cpu(const at::Tensor& points,
                                                                 const HardVoxelizeParams& params);

ScatterResult dynamic_scatter_forward_cpu(const at::Tensor& feats, const at::Tensor& coors, ScatterReduce reduce);

// grad_feats [N, C]; point2voxel, voxel_points_count and argmax as the forward gave them.
at::Tensor dynamic_scatter_backward_cpu(const at::Tensor& grad_voxel_feats, const at::Tensor& point2voxel,
                                        const at::Tensor& voxel_points_count, const at::Tensor& argmax,
                                        ScatterReduce reduce);

#ifdef MMOPS_WITH_CUDA
at::Tensor dynamic_voxelize_cuda(const at::Tensor& points, const VoxelGrid& grid);

std::tuple<at::Tensor, at::Tensor, at::Tensor> hard_voxelize_cuda(const at::Tensor& points,
                                                                  const HardVoxelizeParams& params);

ScatterResult dynamic_scatter_forward_cuda(const at::Tensor& feats, const at::Tensor& coors, ScatterReduce reduce);

at::Tensor dynamic_scatter_backward_cuda(const at::Tensor& grad_voxel_feats, const at::Tensor& point2voxel,
                                         const at::Tensor& voxel_points_count, const at::Tensor& argmax,
                                         ScatterReduce reduce);
#endif

} // namespace kernels
} // namespace mmops
