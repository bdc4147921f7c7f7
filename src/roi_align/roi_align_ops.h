#pragma once
// Internal pieces of roi_align shared by the registration, meta and autograd
// files: argument validation and typed handles to the dispatcher ops.

#include "roi_align/roi_align_kernels.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/string_view.h>

#include <tuple>

namespace mmops {

// Checks every argument of roi_align (shapes, dtypes, devices, values) and
// returns them parsed. Works on real and on fake/meta tensors (no data access).
RoIAlignParams check_roi_align_args(
    const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode);

// Checks the arguments of _roi_align_backward.
RoIAlignParams check_roi_align_backward_args(
    const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
    c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio,
    c10::string_view pool_mode);

namespace ops {

inline std::tuple<at::Tensor, at::Tensor> roi_align_forward(
    const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::_roi_align_forward", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(
                           const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double,
                           int64_t, c10::string_view, bool)>();
  return op.call(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
}

inline at::Tensor roi_align_backward(
    const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
    c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio,
    c10::string_view pool_mode, bool aligned) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::_roi_align_backward", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         c10::SymIntArrayRef, double, int64_t, c10::string_view,
                                         bool)>();
  return op.call(grad_output, rois, argmax, input_shape, spatial_scale, sampling_ratio, pool_mode,
                 aligned);
}

} // namespace ops
} // namespace mmops
