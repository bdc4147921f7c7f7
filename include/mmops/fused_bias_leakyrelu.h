#pragma once
// Public C++ API of mmops::fused_bias_leakyrelu (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>

namespace mmops {

// StyleGAN2's fused bias + leaky ReLU with mmcv's semantics
// (mmcv.ops.fused_bias_leakyrelu):
//   input: [N, C, *] floating point; bias: [C], input's dtype
//   output: leaky_relu(input + bias[c], negative_slope) * scale, input's shape and dtype.
// Differentiable w.r.t. input and bias to any order (the gradient of input is
// grad_output * (output > 0 ? scale : negative_slope * scale), mmcv's rule).
at::Tensor fused_bias_leakyrelu(const at::Tensor& input, const at::Tensor& bias, double negative_slope = 0.2,
                                double scale = 1.4142135623730951);

} // namespace mmops
