#pragma once
// Public C++ API of mmops::bias_act (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <optional>

namespace mmops {

// StyleGAN2-ADA / StyleGAN3's fused bias and activation with mmcv's semantics
// (mmcv.ops.bias_act):
//   input: any shape, floating point; bias: [input.size(dim)] of input's dtype, or none
//   output = clamp(f(input + bias along dim) * gain, -clamp, clamp), input's shape,
//   dtype and suggested memory format; the clamp only when clamp is given (>= 0).
// act: "linear", "relu", "lrelu", "tanh", "sigmoid", "elu", "selu", "softplus" or
// "swish"; alpha (lrelu's slope) and gain default to mmcv's per act (lrelu 0.2;
// gain sqrt(2) for relu, lrelu and swish, else 1). Differentiable w.r.t. input
// and bias to the second order (every order for linear, relu and lrelu);
// the gradient is 0 where the output was clamped. docs/ops/bias_act.md.
at::Tensor bias_act(const at::Tensor& input, const std::optional<at::Tensor>& bias = std::nullopt, int64_t dim = 1,
                    c10::string_view act = "linear", std::optional<double> alpha = std::nullopt,
                    std::optional<double> gain = std::nullopt, std::optional<double> clamp = std::nullopt);

} // namespace mmops
