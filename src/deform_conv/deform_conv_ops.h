#pragma once
// Internal to deform_conv2d / modulated_deform_conv2d: the validation
// (deform_conv_checks.cpp), shared by the device entries (deform_conv.cpp) and
// the meta kernels (deform_conv_meta.cpp), and the dispatcher signature of
// each schema (for detail::op_handle).

#include "deform_conv/deform_conv_kernels.h"

#include <ATen/core/Tensor.h>
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
  std::vector<c10::SymInt> output_shape; // [N, C_out, H_out, W_out]
};

// Every argument of a forward call. Works on real and fake/meta tensors (no
// data access); the messages name the op.
DeformConvChecked check_deform_conv2d(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                      c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups,
                                      int64_t deform_groups);

DeformConvChecked check_modulated_deform_conv2d(const at::Tensor& input, const at::Tensor& offset,
                                                const at::Tensor& mask, const at::Tensor& weight,
                                                const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                                c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                                int64_t groups, int64_t deform_groups);

// The forward's checks (mask absent or undefined for deform_conv2d, no bias)
// plus grad_output: [N, C_out, H_out, W_out], the input's dtype and device.
DeformConvChecked check_deform_conv2d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                               const at::Tensor& offset, const std::optional<at::Tensor>& mask,
                                               const at::Tensor& weight, c10::SymIntArrayRef stride,
                                               c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                               int64_t groups, int64_t deform_groups);

} // namespace detail

// deform_conv2d(Tensor input, Tensor offset, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1],
//     SymInt[2] padding=[0, 0], SymInt[2] dilation=[1, 1], int groups=1, int deform_groups=1) -> Tensor
using DeformConv2dFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  const std::optional<at::Tensor>&, c10::SymIntArrayRef, c10::SymIntArrayRef,
                                  c10::SymIntArrayRef, int64_t, int64_t);

// modulated_deform_conv2d(Tensor input, Tensor offset, Tensor mask, Tensor weight, Tensor? bias=None,
//     SymInt[2] stride=[1, 1], SymInt[2] padding=[0, 0], SymInt[2] dilation=[1, 1], int groups=1,
//     int deform_groups=1) -> Tensor
using ModulatedDeformConv2dFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const std::optional<at::Tensor>&, c10::SymIntArrayRef, c10::SymIntArrayRef,
                                           c10::SymIntArrayRef, int64_t, int64_t);

// _deform_conv2d_backward(Tensor grad_output, Tensor input, Tensor offset, Tensor? mask, Tensor weight,
//     SymInt[2] stride, SymInt[2] padding, SymInt[2] dilation, int groups, int deform_groups,
//     bool[5] output_mask) -> (Tensor grad_input, Tensor grad_offset, Tensor grad_mask,
//     Tensor grad_weight, Tensor grad_bias)
using DeformConv2dBackwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, const at::Tensor&,
    c10::SymIntArrayRef, c10::SymIntArrayRef, c10::SymIntArrayRef, int64_t, int64_t, std::array<bool, 5>);

} // namespace mmops
