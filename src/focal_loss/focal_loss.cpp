// mmops::sigmoid_focal_loss and mmops::softmax_focal_loss: schemas, CPU/CUDA
// registration and the public C++ API. Validation is in focal_loss_checks.cpp,
// kernels in kernels/focal_loss, the meta (shape) functions in
// focal_loss_meta.cpp and autograd in focal_loss_autograd.cpp.

#include "focal_loss/focal_loss_ops.h"

#include <mmops/focal_loss.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  m.def(
      "sigmoid_focal_loss(Tensor input, Tensor target, float gamma=2.0, float alpha=0.25, "
      "Tensor? weight=None, str reduction=\"mean\") -> Tensor",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "_sigmoid_focal_loss_backward(Tensor grad_output, Tensor input, Tensor target, float gamma, "
      "float alpha, Tensor? weight, str reduction) -> Tensor",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "softmax_focal_loss(Tensor input, Tensor target, float gamma=2.0, float alpha=0.25, "
      "Tensor? weight=None, str reduction=\"mean\") -> Tensor",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "_softmax_focal_loss_backward(Tensor grad_output, Tensor input, Tensor target, float gamma, "
      "float alpha, Tensor? weight, str reduction) -> Tensor",
      {at::Tag::pt2_compliant_tag});
}

namespace mmops {
namespace {

constexpr const char* kSigmoidOp = "mmops::sigmoid_focal_loss: ";
constexpr const char* kSoftmaxOp = "mmops::softmax_focal_loss: ";

constexpr const char* name_of(FocalKind kind) {
  return kind == FocalKind::Sigmoid ? kSigmoidOp : kSoftmaxOp;
}


template <FocalKind kKind, auto Forward>
at::Tensor forward_kernel(const at::Tensor& input, const at::Tensor& target, double gamma,
                          double alpha, const std::optional<at::Tensor>& weight,
                          c10::string_view reduction) {
  const FocalLossParams p =
      detail::check_focal_forward(name_of(kKind), kKind, input, target, gamma, alpha, weight, reduction);
  detail::check_class_ids_if_needed(name_of(kKind), kKind, target, input.size(1));
  return Forward(input, target, weight.value_or(at::Tensor()), p);
}

template <FocalKind kKind, auto Backward>
at::Tensor backward_kernel(const at::Tensor& grad_output, const at::Tensor& input,
                           const at::Tensor& target, double gamma, double alpha,
                           const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  const FocalLossParams p = detail::check_focal_backward(name_of(kKind), kKind, grad_output, input,
                                                         target, gamma, alpha, weight, reduction);
  detail::check_class_ids_if_needed(name_of(kKind), kKind, target, input.size(1));
  return Backward(grad_output, input, target, weight.value_or(at::Tensor()), p);
}

using FocalFn = at::Tensor(const at::Tensor&, const at::Tensor&, double, double,
                           const std::optional<at::Tensor>&, c10::string_view);

} // namespace

at::Tensor sigmoid_focal_loss(const at::Tensor& input, const at::Tensor& target, double gamma,
                              double alpha, const std::optional<at::Tensor>& weight,
                              c10::string_view reduction) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::sigmoid_focal_loss", "")
                       .typed<FocalFn>();
  return op.call(input, target, gamma, alpha, weight, reduction);
}

at::Tensor softmax_focal_loss(const at::Tensor& input, const at::Tensor& target, double gamma,
                              double alpha, const std::optional<at::Tensor>& weight,
                              c10::string_view reduction) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::softmax_focal_loss", "")
                       .typed<FocalFn>();
  return op.call(input, target, gamma, alpha, weight, reduction);
}

} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, CPU, m) {
  using namespace mmops;
  m.impl("sigmoid_focal_loss", &forward_kernel<FocalKind::Sigmoid, kernels::sigmoid_focal_loss_forward_cpu>);
  m.impl("_sigmoid_focal_loss_backward", &backward_kernel<FocalKind::Sigmoid, kernels::sigmoid_focal_loss_backward_cpu>);
  m.impl("softmax_focal_loss", &forward_kernel<FocalKind::Softmax, kernels::softmax_focal_loss_forward_cpu>);
  m.impl("_softmax_focal_loss_backward", &backward_kernel<FocalKind::Softmax, kernels::softmax_focal_loss_backward_cpu>);
}

#ifdef MMOPS_WITH_CUDA
TORCH_LIBRARY_IMPL(mmops, CUDA, m) {
  using namespace mmops;
  m.impl("sigmoid_focal_loss", &forward_kernel<FocalKind::Sigmoid, kernels::sigmoid_focal_loss_forward_cuda>);
  m.impl("_sigmoid_focal_loss_backward", &backward_kernel<FocalKind::Sigmoid, kernels::sigmoid_focal_loss_backward_cuda>);
  m.impl("softmax_focal_loss", &forward_kernel<FocalKind::Softmax, kernels::softmax_focal_loss_forward_cuda>);
  m.impl("_softmax_focal_loss_backward", &backward_kernel<FocalKind::Softmax, kernels::softmax_focal_loss_backward_cuda>);
}
#endif
