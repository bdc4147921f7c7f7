// mmops::sigmoid_focal_loss and mmops::softmax_focal_loss: schemas, device
// entries (CPU/CUDA registration) and the public C++ API. Validation is in
// focal_loss_checks.cpp, kernels in kernels/focal_loss, the meta (shape)
// functions in focal_loss_meta.cpp and autograd in focal_loss_autograd.cpp.

#include "focal_loss/focal_loss_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"
#include "common/index_policy.h"

#include <mmops/focal_loss.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "sigmoid_focal_loss(Tensor input, Tensor target, float gamma=2.0, float alpha=0.25, "
            "Tensor? weight=None, str reduction=\"mean\") -> Tensor");
  define_op(m,
            "_sigmoid_focal_loss_backward(Tensor grad_output, Tensor input, Tensor target, float gamma, "
            "float alpha, Tensor? weight, str reduction) -> Tensor");
  define_op(m,
            "softmax_focal_loss(Tensor input, Tensor target, float gamma=2.0, float alpha=0.25, "
            "Tensor? weight=None, str reduction=\"mean\") -> Tensor");
  define_op(m,
            "_softmax_focal_loss_backward(Tensor grad_output, Tensor input, Tensor target, float gamma, "
            "float alpha, Tensor? weight, str reduction) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the class ids when
// the index policy says so, then the kernel (CPU or CUDA). The two losses
// share the set-up.

void check_class_ids_by_policy(FocalKind kind, const at::Tensor& input, const at::Tensor& target) {
  if (detail::should_validate_indices(target)) {
    detail::check_class_ids(kind, target, input.size(1));
  }
}

FocalLossParams forward_params(FocalKind kind, const at::Tensor& input, const at::Tensor& target, double gamma,
                               double alpha, const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  const FocalLossParams p = detail::check_focal_forward(kind, input, target, gamma, alpha, weight, reduction);
  check_class_ids_by_policy(kind, input, target);
  return p;
}

FocalLossParams backward_params(FocalKind kind, const at::Tensor& grad_output, const at::Tensor& input,
                                const at::Tensor& target, double gamma, double alpha,
                                const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  const FocalLossParams p =
      detail::check_focal_backward(kind, grad_output, input, target, gamma, alpha, weight, reduction);
  check_class_ids_by_policy(kind, input, target);
  return p;
}

template <FocalKind kKind, auto Kernel>
at::Tensor forward_entry(const at::Tensor& input, const at::Tensor& target, double gamma, double alpha,
                         const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  const FocalLossParams p = forward_params(kKind, input, target, gamma, alpha, weight, reduction);
  return Kernel(input, target, weight.value_or(at::Tensor()), p);
}

template <FocalKind kKind, auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                          double gamma, double alpha, const std::optional<at::Tensor>& weight,
                          c10::string_view reduction) {
  const FocalLossParams p = backward_params(kKind, grad_output, input, target, gamma, alpha, weight, reduction);
  return Kernel(grad_output, input, target, weight.value_or(at::Tensor()), p);
}

} // namespace

at::Tensor sigmoid_focal_loss(const at::Tensor& input, const at::Tensor& target, double gamma, double alpha,
                              const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  static const auto op = detail::op_handle<FocalLossFn>("mmops::sigmoid_focal_loss");
  return op.call(input, target, gamma, alpha, weight, reduction);
}

at::Tensor softmax_focal_loss(const at::Tensor& input, const at::Tensor& target, double gamma, double alpha,
                              const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  static const auto op = detail::op_handle<FocalLossFn>("mmops::softmax_focal_loss");
  return op.call(input, target, gamma, alpha, weight, reduction);
}

} // namespace mmops

#define MMOPS_FOCAL_LOSS_ENTRIES(m, device)                                                                           \
  m.impl("sigmoid_focal_loss", &forward_entry<FocalKind::Sigmoid, kernels::focal_loss_forward_##device>);             \
  m.impl("_sigmoid_focal_loss_backward", &backward_entry<FocalKind::Sigmoid, kernels::focal_loss_backward_##device>); \
  m.impl("softmax_focal_loss", &forward_entry<FocalKind::Softmax, kernels::focal_loss_forward_##device>);             \
  m.impl("_softmax_focal_loss_backward", &backward_entry<FocalKind::Softmax, kernels::focal_loss_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_FOCAL_LOSS_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kFloat32, "sigmoid_focal_loss", "softmax_focal_loss")
