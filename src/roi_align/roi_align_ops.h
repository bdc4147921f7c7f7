#pragma once
// Internal pieces of roi_align and multi_level_roi_align shared by their
// registration, meta and autograd files: validation and typed dispatcher handles.

#include "roi_align/roi_align_kernels.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/string_view.h>

#include <tuple>
#include <vector>

namespace mmops {
namespace detail {

// Checks every argument of a forward call (shapes, dtypes, devices, values)
// and returns them parsed; `single` names the one feature map "input".
// Works on real and on fake/meta tensors (no data access).
RoIAlignParams check_forward(const char* op, at::TensorList features, bool single,
                             const at::Tensor& rois, c10::SymIntArrayRef output_size,
                             c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
                             c10::string_view pool_mode, bool aligned, int64_t finest_scale);

// Checks the arguments of a backward call; `channels` is the features' C.
RoIAlignParams check_backward(const char* op, const at::Tensor& grad_output, const at::Tensor& rois,
                              const at::Tensor& argmax, const c10::SymInt& channels,
                              c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
                              c10::string_view pool_mode, bool aligned, int64_t finest_scale);

// roi_align is the one-map case of the checks above (input_shape = [N, C, H, W]).
RoIAlignParams check_roi_align_forward(const char* op, const at::Tensor& input, const at::Tensor& rois,
                                       c10::SymIntArrayRef output_size, double spatial_scale,
                                       int64_t sampling_ratio, c10::string_view pool_mode, bool aligned);
RoIAlignParams check_roi_align_backward(const char* op, const at::Tensor& grad_output,
                                        const at::Tensor& rois, const at::Tensor& argmax,
                                        c10::SymIntArrayRef input_shape, double spatial_scale,
                                        int64_t sampling_ratio, c10::string_view pool_mode,
                                        bool aligned);

} // namespace detail

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

inline std::tuple<at::Tensor, at::Tensor> multi_level_roi_align_forward(
    at::TensorList features, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio, c10::string_view pool_mode,
    bool aligned, int64_t finest_scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::_multi_level_roi_align_forward", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(
                           at::TensorList, const at::Tensor&, c10::SymIntArrayRef,
                           c10::ArrayRef<double>, int64_t, c10::string_view, bool, int64_t)>();
  return op.call(features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned,
                 finest_scale);
}

inline std::vector<at::Tensor> multi_level_roi_align_backward(
    const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
    c10::SymIntArrayRef feature_sizes, c10::ArrayRef<double> spatial_scales,
    int64_t sampling_ratio, c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::_multi_level_roi_align_backward", "")
                       .typed<std::vector<at::Tensor>(
                           const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           c10::SymIntArrayRef, c10::ArrayRef<double>, int64_t, c10::string_view,
                           bool, int64_t)>();
  return op.call(grad_output, rois, argmax, feature_sizes, spatial_scales, sampling_ratio,
                 pool_mode, aligned, finest_scale);
}

} // namespace ops
} // namespace mmops
