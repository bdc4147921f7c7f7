#pragma once
// Device kernels of corner_pool. Callers (src/corner_pool) validate the
// arguments first; these functions only compute.

#include "corner_pool/corner_pool_math.h"

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// input [N, C, H, W] -> output [N, C, H, W] in input.suggest_memory_format():
// the running maximum of the mode (corner_pool_math.h).
at::Tensor corner_pool_forward_cpu(const at::Tensor& input, const CornerPoolParams& params);

// The gradient [N, C, H, W] of input (in input.suggest_memory_format()): each
// output gradient summed (in scan order, in the accumulate type) into the
// position its output took; the argmax is recomputed from input.
at::Tensor corner_pool_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input,
                                    const CornerPoolParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor corner_pool_forward_cuda(const at::Tensor& input, const CornerPoolParams& params);

at::Tensor corner_pool_backward_cuda(const at::Tensor& grad_output, const at::Tensor& input,
                                     const CornerPoolParams& params);
#endif

} // namespace kernels
} // namespace mmops
