#pragma once
// Device kernels of upfirdn2d. Callers (src/upfirdn2d) validate the arguments
// first; these functions only compute.

#include "upfirdn2d/upfirdn2d_math.h"

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// input [N, C, H, W], kernel [kh, kw] (any floating dtype; its values are used
// in the accumulation type) -> [N, C, out_h, out_w] in input's dtype:
// zero-insertion upsampling, zero padding / cropping, convolution with kernel
// (the flipped kernel slides over the signal), every down-th sample kept.
at::Tensor upfirdn2d_forward_cpu(const at::Tensor& input, const at::Tensor& kernel, const Upfirdn2dParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor upfirdn2d_forward_cuda(const at::Tensor& input, const at::Tensor& kernel, const Upfirdn2dParams& params);
#endif

} // namespace kernels
} // namespace mmops
