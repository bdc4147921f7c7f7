#pragma once
// Device kernels of sigmoid_focal_loss and softmax_focal_loss. Callers
// (src/focal_loss) validate the arguments first; these functions only compute.
// `weight` is undefined when not given. Class ids out of range (only possible
// on CUDA, where they are not checked unless in strict mode) make their row
// contribute 0 to the loss and receive a zero gradient.

#include "focal_loss/focal_loss_math.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace mmops {

// Which of the two losses; they share their arguments, checks and entry points.
enum class FocalKind { Sigmoid, Softmax };

struct FocalLossParams {
  FocalKind kind;
  double gamma;
  double alpha;
  focal_loss_math::Reduction reduction;
};

// A call's tensors as the kernels read them: contiguous (weight stays
// undefined when not given, grad_output in a forward call).
struct FocalInputs {
  at::Tensor input, target, weight, grad_output;

  FocalInputs(const at::Tensor& input_, const at::Tensor& target_, const at::Tensor& weight_,
              const at::Tensor& grad_output_ = at::Tensor())
      : input(input_.contiguous()),
        target(target_.contiguous()),
        weight(weight_.defined() ? weight_.contiguous() : weight_),
        grad_output(grad_output_.defined() ? grad_output_.contiguous() : grad_output_) {}

  // The class weights, or null without them.
  template <typename scalar_t>
  const scalar_t* weight_data() const {
    return weight.defined() ? weight.const_data_ptr<scalar_t>() : nullptr;
  }
};

// The factor of a reduced loss: mmcv's mean divides by N = input.size(0)
// (0 / 0 = NaN for no rows, as torch.mean); sum and none keep 1.
inline double reduction_scale(const FocalLossParams& p, int64_t rows) {
  return p.reduction == focal_loss_math::Reduction::Mean ? 1.0 / static_cast<double>(rows) : 1.0;
}

// The loss: [N, C] (sigmoid) or [N] (softmax) for reduction "none", else 0-d.
inline std::vector<int64_t> loss_shape(const at::Tensor& input, const FocalLossParams& p) {
  if (p.reduction != focal_loss_math::Reduction::None) {
    return {};
  }
  if (p.kind == FocalKind::Sigmoid) {
    return input.sizes().vec();
  }
  return {input.size(0)};
}

namespace kernels {

// The loss of p.kind (loss_shape), and its gradient w.r.t. input ([N, C]);
// grad_output has the loss' shape.
at::Tensor focal_loss_forward_cpu(const at::Tensor& input, const at::Tensor& target, const at::Tensor& weight,
                                  const FocalLossParams& p);
at::Tensor focal_loss_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                                   const at::Tensor& weight, const FocalLossParams& p);

#ifdef MMOPS_WITH_CUDA
at::Tensor focal_loss_forward_cuda(const at::Tensor& input, const at::Tensor& target, const at::Tensor& weight,
                                   const FocalLossParams& p);
at::Tensor focal_loss_backward_cuda(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                                    const at::Tensor& weight, const FocalLossParams& p);
#endif

} // namespace kernels
} // namespace mmops
