#pragma once
// Device kernels of sigmoid_focal_loss and softmax_focal_loss. Callers
// (src/focal_loss) validate the arguments first; these functions only compute.
// `weight` is undefined when not given. Class ids out of range (only possible
// on CUDA, where they are not checked unless in strict mode) make their row
// contribute 0 to the loss and receive a zero gradient.

#include "focal_loss/focal_loss_math.h"

#include <ATen/core/Tensor.h>

namespace mmops {

struct FocalLossParams {
  double gamma;
  double alpha;
  focal_loss_math::Reduction reduction;
};

// The factor of a reduced loss: mmcv's mean divides by N = input.size(0)
// (0 / 0 = NaN for no rows, as torch.mean); sum and none keep 1.
inline double reduction_scale(const FocalLossParams& p, int64_t rows) {
  return p.reduction == focal_loss_math::Reduction::Mean ? 1.0 / static_cast<double>(rows) : 1.0;
}

namespace kernels {

// Sigmoid: loss [N, C] (none) or a 0-d tensor (mean: sum / N, sum).
at::Tensor sigmoid_focal_loss_forward_cpu(const at::Tensor& input, const at::Tensor& target,
                                          const at::Tensor& weight, const FocalLossParams& p);
at::Tensor sigmoid_focal_loss_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input,
                                           const at::Tensor& target, const at::Tensor& weight,
                                           const FocalLossParams& p);
// Softmax: loss [N] (none) or a 0-d tensor.
at::Tensor softmax_focal_loss_forward_cpu(const at::Tensor& input, const at::Tensor& target,
                                          const at::Tensor& weight, const FocalLossParams& p);
at::Tensor softmax_focal_loss_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input,
                                           const at::Tensor& target, const at::Tensor& weight,
                                           const FocalLossParams& p);

#ifdef MMOPS_WITH_CUDA
at::Tensor sigmoid_focal_loss_forward_cuda(const at::Tensor& input, const at::Tensor& target,
                                           const at::Tensor& weight, const FocalLossParams& p);
at::Tensor sigmoid_focal_loss_backward_cuda(const at::Tensor& grad_output, const at::Tensor& input,
                                            const at::Tensor& target, const at::Tensor& weight,
                                            const FocalLossParams& p);
at::Tensor softmax_focal_loss_forward_cuda(const at::Tensor& input, const at::Tensor& target,
                                           const at::Tensor& weight, const FocalLossParams& p);
at::Tensor softmax_focal_loss_backward_cuda(const at::Tensor& grad_output, const at::Tensor& input,
                                            const at::Tensor& target, const at::Tensor& weight,
                                            const FocalLossParams& p);

// True while the current CUDA stream is capturing a graph (no sync allowed).
bool focal_loss_stream_is_capturing();
#endif

} // namespace kernels
} // namespace mmops
