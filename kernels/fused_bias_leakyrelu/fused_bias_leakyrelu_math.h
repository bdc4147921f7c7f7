#pragma once
// Math of fused_bias_leakyrelu shared by the CPU and CUDA kernels (no ATen).

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace fused_bias_leakyrelu_math {

// out = leaky_relu(x + bias, negative_slope) * scale, in the accumulation type
// (one rounding, at the store).
template <typename acc_t>
C10_HOST_DEVICE inline acc_t activate(acc_t x, acc_t bias, acc_t negative_slope, acc_t scale) {
  const acc_t v = x + bias;
  return (v > acc_t(0) ? v : v * negative_slope) * scale;
}

// The gradient of input for grad_output, from the forward's output (mmcv's
// rule): grad * scale where output > 0, grad * negative_slope * scale elsewhere
// (0 and NaN included).
template <typename acc_t>
C10_HOST_DEVICE inline acc_t gradient(acc_t grad, acc_t output, acc_t negative_slope, acc_t scale) {
  return grad * (output > acc_t(0) ? scale : negative_slope * scale);
}

} // namespace fused_bias_leakyrelu_math

// What the kernels need (the validation fills it).
struct FusedBiasLeakyReLUParams {
  int64_t channels = 0; // C (dim 1)
  int64_t inner = 1;    // the product of the dims after 1 (1 for a 2-D input)
  double negative_slope = 0.2;
  double scale = 1.4142135623730951;
};

} // namespace mmops
