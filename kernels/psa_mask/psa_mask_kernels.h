#pragma once
// Device kernels of psa_mask. Callers (src/psa_mask) validate the arguments
// first; these functions only compute.

#include "psa_mask/psa_mask_math.h"

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// input [N, mask_h * mask_w, H, W] -> output [N, H * W, H, W] (psa_mask_math.h).
at::Tensor psa_mask_forward_cpu(const at::Tensor& input, const PsaMaskParams& params);

// grad_output [N, H * W, H, W] -> the gradient [N, mask_h * mask_w, H, W] of input.
at::Tensor psa_mask_backward_cpu(const at::Tensor& grad_output, const PsaMaskParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor psa_mask_forward_cuda(const at::Tensor& input, const PsaMaskParams& params);

at::Tensor psa_mask_backward_cuda(const at::Tensor& grad_output, const PsaMaskParams& params);
#endif

} // namespace kernels
} // namespace mmops
