#pragma once
// Internal to masked_conv: the validation (masked_conv_checks.cpp), shared by
// the device entries (masked_conv.cpp) and the meta kernels
// (masked_conv_meta.cpp), and the dispatcher signature of each schema.

#include "masked_conv/masked_conv_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>

#include <array>
#include <optional>
#include <tuple>

namespace mmops {

// The prefix of every masked_conv2d error message.
constexpr const char* kMaskedConvOp = "mmops::masked_conv2d: ";

namespace detail {

// The checked arguments: the kernels' parameters (out_h / out_w are -1 while
// symbolic: meta only) and the symbolic output plane.
struct MaskedConvChecked {
  MaskedConvParams params;
  c10::SymInt out_h, out_w;
};

// Every argument of a forward call; works on real and fake tensors (no data access).
MaskedConvChecked check_masked_conv2d(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                                      at::IntArrayRef stride);

// The arguments of a backward call (grad_output [N, O, H_out, W_out]).
MaskedConvChecked check_masked_conv2d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                               const at::Tensor& mask, const at::Tensor& weight,
                                               at::IntArrayRef padding, at::IntArrayRef stride);

} // namespace detail

// masked_conv2d(Tensor input, Tensor mask, Tensor weight, Tensor? bias=None, int[2] padding=[0,0],
//     int[2] stride=[1,1]) -> Tensor
using MaskedConv2dFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  const std::optional<at::Tensor>&, at::IntArrayRef, at::IntArrayRef);

// _masked_conv2d_backward(Tensor grad_output, Tensor input, Tensor mask, Tensor weight, int[2] padding,
//     int[2] stride, bool[3] output_mask) -> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)
using MaskedConv2dBackwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                              const at::Tensor&, const at::Tensor&,
                                                                              at::IntArrayRef, at::IntArrayRef,
                                                                              std::array<bool, 3>);

} // namespace mmops
