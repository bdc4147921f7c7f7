#pragma once
// Internal to riroi_align_rotated: the validation (riroi_align_rotated_checks.cpp),
// shared by the device entries, the meta kernels and autograd, and the
// dispatcher signature of each schema (for detail::op_handle).

#include "riroi_align_rotated/riroi_align_rotated_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

namespace mmops {

// The prefix of every riroi_align_rotated error message.
constexpr const char* kRiRoIAlignRotatedOp = "mmops::riroi_align_rotated: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data access).
RotatedRoiParams check_riroi_align_rotated_forward(const at::Tensor& features, const at::Tensor& rois,
                                                   c10::SymIntArrayRef out_size, double spatial_scale,
                                                   int64_t num_samples, int64_t num_orientations, bool clockwise);

// The arguments of a backward call (input_shape = [N, C, H, W]).
RotatedRoiParams check_riroi_align_rotated_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                                                    c10::SymIntArrayRef input_shape, double spatial_scale,
                                                    int64_t num_samples, int64_t num_orientations, bool clockwise);

} // namespace detail

// riroi_align_rotated(Tensor features, Tensor rois, SymInt[2] out_size, float spatial_scale=1.0,
//     int num_samples=0, int num_orientations=8, bool clockwise=False) -> Tensor
using RiRoIAlignRotatedFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double, int64_t,
                                       int64_t, bool);

// _riroi_align_rotated_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape,
//     float spatial_scale, int num_samples, int num_orientations, bool clockwise) -> Tensor
using RiRoIAlignRotatedBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double,
                                               int64_t, int64_t, bool);

} // namespace mmops
