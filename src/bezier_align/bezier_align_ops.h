#pragma once
// Internal to bezier_align: the validation (bezier_align_checks.cpp), shared by
// the device entries (bezier_align.cpp) and the meta kernels
// (bezier_align_meta.cpp), and the dispatcher signature of each schema (for
// detail::op_handle).

#include "bezier_align/bezier_align_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

#include <cstdint>

namespace mmops {

// The prefix of every bezier_align error message.
constexpr const char* kBezierAlignOp = "mmops::bezier_align: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data
// access). Sizes still symbolic are -1 in the params (meta only).
BezierAlignParams check_bezier_align_forward(const at::Tensor& input, const at::Tensor& rois,
                                             c10::SymIntArrayRef output_size, double spatial_scale,
                                             int64_t sampling_ratio, bool aligned);

// The arguments of a backward call (input_shape = [N, C, H, W]).
BezierAlignParams check_bezier_align_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                                              c10::SymIntArrayRef input_shape, double spatial_scale,
                                              int64_t sampling_ratio, bool aligned);

} // namespace detail

// bezier_align(Tensor input, Tensor rois, SymInt[2] output_size, float spatial_scale, int sampling_ratio,
//              bool aligned) -> Tensor
using BezierAlignFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double, int64_t, bool);

// _bezier_align_backward(Tensor grad_output, Tensor rois, SymInt[4] input_shape, float spatial_scale,
//                        int sampling_ratio, bool aligned) -> Tensor
using BezierAlignBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double, int64_t,
                                         bool);

} // namespace mmops
