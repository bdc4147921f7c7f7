#pragma once
// Device kernels of bezier_align. Callers (src/bezier_align) validate the
// arguments first; these functions only compute.

#include "bezier_align/bezier_align_math.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace mmops {
namespace kernels {

// input [N, C, H, W], rois [K, 17] -> output [K, C, PH, PW] (NCHW, input's dtype).
at::Tensor bezier_align_forward_cpu(const at::Tensor& input, const at::Tensor& rois, const BezierAlignParams& params);

// The gradient [N, C, H, W] (input_shape) of input from grad_output [K, C, PH, PW].
at::Tensor bezier_align_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois,
                                     const std::vector<int64_t>& input_shape, const BezierAlignParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor bezier_align_forward_cuda(const at::Tensor& input, const at::Tensor& rois, const BezierAlignParams& params);

at::Tensor bezier_align_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois,
                                      const std::vector<int64_t>& input_shape, const BezierAlignParams& params);
#endif

} // namespace kernels
} // namespace mmops
