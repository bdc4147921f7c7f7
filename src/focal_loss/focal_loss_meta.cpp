// Meta (shape and dtype only) kernels of the focal losses, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "focal_loss/focal_loss_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

// The loss: [N, C] (sigmoid) or [N] (softmax) for reduction "none", else 0-d.
template <FocalKind kKind>
at::Tensor forward_meta(const at::Tensor& input, const at::Tensor& target, double gamma, double alpha,
                        const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  const FocalLossParams p = detail::check_focal_forward(kKind, input, target, gamma, alpha, weight, reduction);
  if (p.reduction != focal_loss_math::Reduction::None) {
    return at::empty({}, input.options());
  }
  if (kKind == FocalKind::Sigmoid) {
    return at::empty_symint(input.sym_sizes(), input.options());
  }
  return at::empty_symint({input.sym_size(0)}, input.options());
}

template <FocalKind kKind>
at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target, double gamma,
                         double alpha, const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  detail::check_focal_backward(kKind, grad_output, input, target, gamma, alpha, weight, reduction);
  return at::empty_symint(input.sym_sizes(), input.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  using mmops::FocalKind;
  m.impl("sigmoid_focal_loss", &mmops::forward_meta<FocalKind::Sigmoid>);
  m.impl("_sigmoid_focal_loss_backward", &mmops::backward_meta<FocalKind::Sigmoid>);
  m.impl("softmax_focal_loss", &mmops::forward_meta<FocalKind::Softmax>);
  m.impl("_softmax_focal_loss_backward", &mmops::backward_meta<FocalKind::Softmax>);
}
