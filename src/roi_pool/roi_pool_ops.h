#pragma once
// Internal pieces of roi_pool shared by its registration, meta and autograd
// files: validation and typed dispatcher handles.

#include "roi_pool/roi_pool_kernels.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymIntArrayRef.h>

#include <tuple>

namespace mmops {
namespace detail {

// Every argument of a forward call; works on real and fake tensors (no data access).
RoIPoolParams check_roi_pool_forward(const char* op, const at::Tensor& input, const at::Tensor& rois,
                                     c10::SymIntArrayRef output_size, double spatial_scale);

// The arguments of a backward call (input_shape = [N, C, H, W]).
RoIPoolParams check_roi_pool_backward(const char* op, const at::Tensor& grad_output,
                                      const at::Tensor& rois, const at::Tensor& argmax,
                                      c10::SymIntArrayRef input_shape, double spatial_scale);

} // namespace detail

namespace ops {

inline std::tuple<at::Tensor, at::Tensor> roi_pool_forward(
    const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
    double spatial_scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::_roi_pool_forward", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(
                           const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, double)>();
  return op.call(input, rois, output_size, spatial_scale);
}

inline at::Tensor roi_pool_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                                    const at::Tensor& argmax, c10::SymIntArrayRef input_shape,
                                    double spatial_scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::_roi_pool_backward", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         c10::SymIntArrayRef, double)>();
  return op.call(grad_output, rois, argmax, input_shape, spatial_scale);
}

} // namespace ops
} // namespace mmops
