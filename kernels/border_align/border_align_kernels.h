#pragma once
// Device kernels of border_align. Callers (src/border_align) validate the
// arguments first; these functions only compute.

#include "border_align/border_align_math.h"

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {
namespace kernels {

// input [N, 4C, H, W], boxes [N, H * W, 4] -> (output [N, C, H * W, 4], argmax_idx):
// argmax_idx (int32, the shape of output) holds the winning point of each
// output in [0, pool_size] when `with_argmax`, else it is an empty int32 tensor.
std::tuple<at::Tensor, at::Tensor> border_align_forward_cpu(const at::Tensor& input, const at::Tensor& boxes,
                                                            const BorderAlignParams& params, bool with_argmax);

// The gradient [N, 4C, H, W] of input: each output's gradient goes to the four
// bilinear neighbours of its winning point (an argmax_idx outside [0, pool_size]
// sends nothing).
at::Tensor border_align_backward_cpu(const at::Tensor& grad_output, const at::Tensor& boxes,
                                     const at::Tensor& argmax_idx, const BorderAlignParams& params);

#ifdef MMOPS_WITH_CUDA
std::tuple<at::Tensor, at::Tensor> border_align_forward_cuda(const at::Tensor& input, const at::Tensor& boxes,
                                                             const BorderAlignParams& params, bool with_argmax);

at::Tensor border_align_backward_cuda(const at::Tensor& grad_output, const at::Tensor& boxes,
                                      const at::Tensor& argmax_idx, const BorderAlignParams& params);
#endif

} // namespace kernels
} // namespace mmops
