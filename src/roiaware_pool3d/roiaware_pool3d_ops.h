#pragma once
// Internal to roiaware_pool3d: the validation (roiaware_pool3d_checks.cpp)
// shared by the device entries and the meta kernels, the mode choices and the
// dispatcher signature of each schema.

#include "roiaware_pool3d/roiaware_pool3d_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/string_view.h>

#include <tuple>
#include <utility>

namespace mmops {

constexpr const char* kRoIAwarePool3dOp = "mmops::roiaware_pool3d: ";

namespace detail {

inline constexpr std::pair<const char*, RoIAwarePoolMode> kRoIAwarePoolModes[] = {{"max", RoIAwarePoolMode::kMax},
                                                                                  {"avg", RoIAwarePoolMode::kAvg}};

// rois [N, 7], pts [P, 3], pts_feature [P, C], one floating dtype and device;
// out_size 3 values >= 1, max_pts_per_voxel >= 1, mode "max" / "avg"; P <
// 2^31; sizes of the outputs within int64. Works on fake tensors; the sizes
// in the returned Params are -1 while symbolic.
RoIAwarePool3dParams check_roiaware_pool3d_forward(const at::Tensor& rois, const at::Tensor& pts,
                                                   const at::Tensor& pts_feature, c10::SymIntArrayRef out_size,
                                                   int64_t max_pts_per_voxel, c10::string_view mode);

// grad_output [N, X, Y, Z, C] floating; point_voxels int32 [N, P];
// voxel_counts int32 [N, X * Y * Z]; argmax int32 of grad_output's shape (max)
// or any (avg); one device.
RoIAwarePool3dParams check_roiaware_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& argmax,
                                                    const at::Tensor& point_voxels, const at::Tensor& voxel_counts,
                                                    c10::string_view mode);

// point_voxels in [-1, X * Y * Z) (reads the data: the index policy decides when).
void check_point_voxels(const at::Tensor& point_voxels, int64_t voxels);

} // namespace detail

// roiaware_pool3d(Tensor rois, Tensor pts, Tensor pts_feature, SymInt[3] out_size,
//     int max_pts_per_voxel=128, str mode="max") -> Tensor
using RoIAwarePool3dFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                    int64_t, c10::string_view);

// _roiaware_pool3d_forward(same arguments)
//     -> (Tensor output, Tensor argmax, Tensor point_voxels, Tensor voxel_counts)
using RoIAwarePool3dForwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, int64_t, c10::string_view);

// _roiaware_pool3d_backward(Tensor grad_output, Tensor argmax, Tensor point_voxels,
//     Tensor voxel_counts, str mode) -> Tensor
using RoIAwarePool3dBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                            c10::string_view);

} // namespace mmops
