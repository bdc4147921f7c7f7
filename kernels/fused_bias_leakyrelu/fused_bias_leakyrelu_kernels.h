#pragma once
// Device kernels of fused_bias_leakyrelu. Callers (src/fused_bias_leakyrelu)
// validate the arguments first; these functions only compute.

#include "fused_bias_leakyrelu/fused_bias_leakyrelu_math.h"

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// input [N, C, *], bias [C] (input's dtype) -> leaky_relu(input + bias[c], slope) * scale,
// contiguous, input's shape and dtype.
at::Tensor fused_bias_leakyrelu_forward_cpu(const at::Tensor& input, const at::Tensor& bias,
                                            const FusedBiasLeakyReLUParams& params);

// grad_output, output (the forward's; same shape) -> the gradient of input (contiguous).
at::Tensor fused_bias_leakyrelu_backward_cpu(const at::Tensor& grad_output, const at::Tensor& output,
                                             const FusedBiasLeakyReLUParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor fused_bias_leakyrelu_forward_cuda(const at::Tensor& input, const at::Tensor& bias,
                                             const FusedBiasLeakyReLUParams& params);

at::Tensor fused_bias_leakyrelu_backward_cuda(const at::Tensor& grad_output, const at::Tensor& output,
                                              const FusedBiasLeakyReLUParams& params);
#endif

} // namespace kernels
} // namespace mmops
