#pragma once
// Internal to hard_voxelize, dynamic_voxelize and dynamic_scatter: the
// validation (voxelization_checks.cpp), shared by the device entries
// (voxelization.cpp), the meta kernels (voxelization_meta.cpp) and the
// validation-only schemas of the Python fake kernels, and the dispatcher
// signature of each schema (for detail::op_handle).

#include "voxelization/voxelization_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/string_view.h>

#include <tuple>

namespace mmops {

constexpr const char* kHardVoxelizeOp = "mmops::hard_voxelize: ";
constexpr const char* kDynamicVoxelizeOp = "mmops::dynamic_voxelize: ";
constexpr const char* kDynamicScatterOp = "mmops::dynamic_scatter: ";

namespace detail {

// Every argument of a call; works on real and fake tensors (no data access).
VoxelGrid check_dynamic_voxelize(const at::Tensor& points, c10::ArrayRef<double> voxel_size,
                                 c10::ArrayRef<double> coors_range);

HardVoxelizeParams check_hard_voxelize(const at::Tensor& points, c10::ArrayRef<double> voxel_size,
                                       c10::ArrayRef<double> coors_range, const c10::SymInt& max_points,
                                       int64_t max_voxels);

ScatterReduce check_dynamic_scatter(const at::Tensor& feats, const at::Tensor& coors, c10::string_view reduce);

ScatterReduce check_dynamic_scatter_backward(const at::Tensor& grad_voxel_feats, const at::Tensor& point2voxel,
                                             const at::Tensor& voxel_points_count, const at::Tensor& argmax,
                                             c10::string_view reduce);

// The indices in the backward's saved tensors (data: CPU, or CUDA under the
// strict switch): point2voxel in [-1, M), counts >= 1, argmax in [0, N).
void check_scatter_indices(const at::Tensor& point2voxel, const at::Tensor& voxel_points_count,
                           const at::Tensor& argmax);

// The name of a reduction ("sum", "mean", "max").
const char* reduce_name(ScatterReduce reduce);

} // namespace detail

// dynamic_voxelize(Tensor points, float[3] voxel_size, float[6] coors_range) -> Tensor
using DynamicVoxelizeFn = at::Tensor(const at::Tensor&, c10::ArrayRef<double>, c10::ArrayRef<double>);

// hard_voxelize(Tensor points, float[3] voxel_size, float[6] coors_range, SymInt max_points=35,
//     int max_voxels=20000) -> (Tensor voxels, Tensor coors, Tensor num_points_per_voxel)
using HardVoxelizeFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, c10::ArrayRef<double>,
                                                                      c10::ArrayRef<double>, c10::SymInt, int64_t);

// dynamic_scatter(Tensor feats, Tensor coors, str reduce="max") -> (Tensor voxel_feats, Tensor voxel_coors)
using DynamicScatterFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, c10::string_view);

// _dynamic_scatter_forward(Tensor feats, Tensor coors, str reduce) -> (Tensor voxel_feats,
//     Tensor voxel_coors, Tensor point2voxel, Tensor voxel_points_count, Tensor argmax)
using DynamicScatterForwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, c10::string_view);

// _dynamic_scatter_backward(Tensor grad_voxel_feats, Tensor point2voxel, Tensor voxel_points_count,
//     Tensor argmax, str reduce) -> Tensor
using DynamicScatterBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                            c10::string_view);

} // namespace mmops
