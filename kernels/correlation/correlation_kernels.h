#pragma once
// Device kernels of correlation. Callers (src/correlation) validate the
// arguments first; these functions only compute.

#include "correlation/correlation_math.h"

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {
namespace kernels {

// input1, input2 [N, C, H, W] -> [N, P, P, oH, oW] (P = 2 * max_displacement + 1):
// output[n, ph, pw, oh, ow] = sum over the kernel taps (i, j) and channels c of
// input1[n, c, y, x] * input2[n, c, y + dy, x + dx], (y, x) the tap's input position,
// (dy, dx) the displacement of (ph, pw); terms with a position outside the map are 0.
at::Tensor correlation_forward_cpu(const at::Tensor& input1, const at::Tensor& input2, const CorrelationParams& params);

// (grad_input1, grad_input2) [N, C, H, W] of grad_output [N, P, P, oH, oW].
std::tuple<at::Tensor, at::Tensor> correlation_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input1,
                                                            const at::Tensor& input2, const CorrelationParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor correlation_forward_cuda(const at::Tensor& input1, const at::Tensor& input2,
                                    const CorrelationParams& params);

std::tuple<at::Tensor, at::Tensor> correlation_backward_cuda(const at::Tensor& grad_output, const at::Tensor& input1,
                                                             const at::Tensor& input2, const CorrelationParams& params);
#endif

} // namespace kernels
} // namespace mmops
