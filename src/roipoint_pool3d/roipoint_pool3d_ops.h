#pragma once
// Internal to roipoint_pool3d: the validation (roipoint_pool3d_checks.cpp)
// shared by the device entries and the meta kernel, and the dispatcher
// signature of the schema.

#include "roipoint_pool3d/roipoint_pool3d_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <tuple>

namespace mmops {

constexpr const char* kRoIPointPool3dOp = "mmops::roipoint_pool3d: ";

namespace detail {

// points [B, N, 3], point_features [B, N, C], boxes3d [B, M, 7], one floating
// dtype and device; N < 2^31 (point indices are int32); 1 <= S < 2^31; the
// output [B, M, S, 3 + C] within int64. Works on fake tensors.
void check_roipoint_pool3d(const at::Tensor& points, const at::Tensor& point_features, const at::Tensor& boxes3d,
                           const c10::SymInt& num_sampled_points);

} // namespace detail

// roipoint_pool3d(Tensor points, Tensor point_features, Tensor boxes3d, SymInt num_sampled_points=512)
//     -> (Tensor pooled_features, Tensor pooled_empty_flag)
using RoIPointPool3dFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                            c10::SymInt);

} // namespace mmops
