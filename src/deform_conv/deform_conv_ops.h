#pragma once
// Internal pieces of deform_conv2d / modulated_deform_conv2d shared by their
// registration, meta and autograd files: validation and typed dispatcher handles.

#include "deform_conv/deform_conv_kernels.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>

#include <array>
#include <optional>
#include <tuple>
#include <vector>

namespace mmops {
namespace detail {

// The checked arguments: concrete parameters (sizes that are symbolic come out
// as -1; only the meta kernel sees those) and the symbolic output shape.
struct DeformConvChecked {
  DeformConvParams params;
  std::vector<c10::SymInt> output_shape;  // [N, C_out, H_out, W_out]
};

// Every argument of a forward call (mask: nullptr for deform_conv2d). Works on
// real and fake/meta tensors (no data access). `op` prefixes the messages.
DeformConvChecked check_deform_conv2d(const char* op, const at::Tensor& input, const at::Tensor& offset,
                                      const at::Tensor* mask, const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                      c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                      int64_t groups, int64_t deform_groups);

// The above (bias absent) plus grad_output: [N, C_out, H_out, W_out], the input's dtype and device.
DeformConvChecked check_deform_conv2d_backward(const char* op, const at::Tensor& grad_output,
                                               const at::Tensor& input, const at::Tensor& offset,
                                               const at::Tensor* mask, const at::Tensor& weight,
                                               c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                               c10::SymIntArrayRef dilation, int64_t groups,
                                               int64_t deform_groups);

} // namespace detail

namespace ops {

using DeformConv2dFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  const std::optional<at::Tensor>&, c10::SymIntArrayRef,
                                  c10::SymIntArrayRef, c10::SymIntArrayRef, int64_t, int64_t);
using ModulatedDeformConv2dFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const at::Tensor&, const std::optional<at::Tensor>&,
                                           c10::SymIntArrayRef, c10::SymIntArrayRef,
                                           c10::SymIntArrayRef, int64_t, int64_t);
using DeformConv2dBackwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
    const at::Tensor&, c10::SymIntArrayRef, c10::SymIntArrayRef, c10::SymIntArrayRef, int64_t, int64_t,
    std::array<bool, 5>);

inline at::Tensor deform_conv2d(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups,
                                int64_t deform_groups) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::deform_conv2d", "")
                       .typed<DeformConv2dFn>();
  return op.call(input, offset, weight, bias, stride, padding, dilation, groups, deform_groups);
}

inline at::Tensor modulated_deform_conv2d(const at::Tensor& input, const at::Tensor& offset,
                                          const at::Tensor& mask, const at::Tensor& weight,
                                          const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                          c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                          int64_t groups, int64_t deform_groups) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::modulated_deform_conv2d", "")
                       .typed<ModulatedDeformConv2dFn>();
  return op.call(input, offset, mask, weight, bias, stride, padding, dilation, groups, deform_groups);
}

inline std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& offset,
    const std::optional<at::Tensor>& mask, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups, int64_t deform_groups,
    std::array<bool, 5> output_mask) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::_deform_conv2d_backward", "")
                       .typed<DeformConv2dBackwardFn>();
  return op.call(grad_output, input, offset, mask, weight, stride, padding, dilation, groups,
                 deform_groups, output_mask);
}

} // namespace ops
} // namespace mmops
