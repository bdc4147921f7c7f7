// Autograd of the focal losses (w.r.t. input; target and weight get no
// gradient, as in mmcv), in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python.

#include "focal_loss/focal_loss_ops.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include <string>

namespace mmops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <FocalKind kKind>
class FocalLossFunction : public torch::autograd::Function<FocalLossFunction<kKind>> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& target,
                            double gamma, double alpha, const std::optional<at::Tensor>& weight,
                            c10::string_view reduction) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow(kKind == FocalKind::Sigmoid ? "mmops::sigmoid_focal_loss"
                                                                        : "mmops::softmax_focal_loss",
                                            "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double, double,
                                           const std::optional<at::Tensor>&, c10::string_view)>();
    at::Tensor output = op.call(input, target, gamma, alpha, weight, reduction);
    const bool has_weight = weight.has_value() && weight->defined();
    ctx->save_for_backward({input, target, has_weight ? *weight : at::Tensor()});
    ctx->saved_data["gamma"] = gamma;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["has_weight"] = has_weight;
    ctx->saved_data["reduction"] = std::string(reduction);
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    TORCH_CHECK(!(grad_output.requires_grad() && at::GradMode::is_enabled()),
                kKind == FocalKind::Sigmoid ? "mmops::sigmoid_focal_loss" : "mmops::softmax_focal_loss",
                ": double backward is not implemented");
    const variable_list saved = ctx->get_saved_variables();
    std::optional<at::Tensor> weight;
    if (ctx->saved_data["has_weight"].toBool()) {
      weight = saved[2];
    }
    at::Tensor grad_input = ops::focal_loss_backward(
        kKind, grad_output, saved[0], saved[1], ctx->saved_data["gamma"].toDouble(),
        ctx->saved_data["alpha"].toDouble(), weight, ctx->saved_data["reduction"].toStringRef());
    // Gradients for (input, target, gamma, alpha, weight, reduction).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

template <FocalKind kKind>
at::Tensor focal_loss_autograd(const at::Tensor& input, const at::Tensor& target, double gamma,
                               double alpha, const std::optional<at::Tensor>& weight,
                               c10::string_view reduction) {
  return FocalLossFunction<kKind>::apply(input, target, gamma, alpha, weight, reduction);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  using mmops::FocalKind;
  m.impl("sigmoid_focal_loss", &mmops::focal_loss_autograd<FocalKind::Sigmoid>);
  m.impl("softmax_focal_loss", &mmops::focal_loss_autograd<FocalKind::Softmax>);
}
