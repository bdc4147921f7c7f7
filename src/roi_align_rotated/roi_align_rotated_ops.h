#pragma once
// Internal to roi_align_rotated: the validation (roi_align_rotated_checks.cpp),
// shared by the device entries, the meta kernels and autograd, and the
// dispatcher signature of each schema (for detail::op_handle).

#include "roi_align_rotated/roi_align_rotated_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

namespace mmops {

// The prefix of every roi_align_rotated error message.
constexpr const char* kRoIAlignRotatedOp = "mmops::roi_align_rotated: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data access).
RotatedRoiParams check_roi_align_rotated_forward(const at::Tensor& input, const at::Tensor& rois,
                                                 c10::SymIntArrayRef output_size, double spatial_scale,
                                                 int64_t sampling_ratio, bool aligned, bool clockwise);

// The arguments of a backward call (input_shape = [N, C, H, W]).
RotatedRoiParams check_roi_align_rotated_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                                                  c10::SymIntArrayRef input_shape, double spatial_scale,
                                                  int64_t sampling_ratio, bool aligned, bool clockwise);

} // namespace detail

// roi_align_rotated(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale=1.0,
//     int sampling_ratio=0, bool aligned=True, bool clockwise=False) -> Tensor
using RoIAlignRotatedFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double, int64_t, bool,
                                     bool);

// _roi_align_rotated_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape,
//     float spatial_scale, int sampling_ratio, bool aligned, bool clockwise) -> Tensor
using RoIAlignRotatedBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double, int64_t,
                                             bool, bool);

} // namespace mmops
