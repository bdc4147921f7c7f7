#pragma once
// Internal to fused_bias_leakyrelu: the validation
// (fused_bias_leakyrelu_checks.cpp), shared by the device entries
// (fused_bias_leakyrelu.cpp) and the meta kernels (fused_bias_leakyrelu_meta.cpp),
// and the dispatcher signature of each schema (for detail::op_handle).

#include "fused_bias_leakyrelu/fused_bias_leakyrelu_kernels.h"

#include <ATen/core/Tensor.h>

namespace mmops {

// The prefix of every fused_bias_leakyrelu error message.
constexpr const char* kFusedBiasLeakyReLUOp = "mmops::fused_bias_leakyrelu: ";

namespace detail {

// Every argument of a forward call; works on real and fake tensors. `inner` is
// -1 while a size is symbolic (meta only).
FusedBiasLeakyReLUParams check_fused_bias_leakyrelu_forward(const at::Tensor& input, const at::Tensor& bias,
                                                            double negative_slope, double scale);

// The arguments of a backward call (output: the forward's).
FusedBiasLeakyReLUParams check_fused_bias_leakyrelu_backward(const at::Tensor& grad_output, const at::Tensor& output,
                                                             double negative_slope, double scale);

} // namespace detail

// fused_bias_leakyrelu(Tensor input, Tensor bias, float negative_slope=0.2, float scale=sqrt(2)) -> Tensor
using FusedBiasLeakyReLUFn = at::Tensor(const at::Tensor&, const at::Tensor&, double, double);

// _fused_bias_leakyrelu_backward(Tensor grad_output, Tensor output, float negative_slope, float scale) -> Tensor
using FusedBiasLeakyReLUBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, double, double);

} // namespace mmops
