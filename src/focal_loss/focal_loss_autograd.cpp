// Autograd of the focal losses (w.r.t. input; target and weight get no
// gradient, as in mmcv), in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python.

#include "focal_loss/focal_loss_ops.h"

#include "common/autograd_utils.h"
#include "common/check_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

using focal_loss_math::Reduction;
template <FocalKind kKind>
class FocalLossFunction : public torch::autograd::Function<FocalLossFunction<kKind>> {
  static constexpr bool kSigmoid = kKind == FocalKind::Sigmoid;
  static constexpr const char* kOpName = kSigmoid ? "mmops::sigmoid_focal_loss" : "mmops::softmax_focal_loss";
  static constexpr const char* kBackwardName =
      kSigmoid ? "mmops::_sigmoid_focal_loss_backward" : "mmops::_softmax_focal_loss_backward";

 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& target, double gamma,
                            double alpha, const std::optional<at::Tensor>& weight, c10::string_view reduction) {
    static const auto op = detail::op_handle<FocalLossFn>(kOpName);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(input, target, gamma, alpha, weight, reduction);
    const bool has_weight = weight.has_value() && weight->defined();
    ctx->save_for_backward({input, target, has_weight ? *weight : at::Tensor()});
    ctx->saved_data["gamma"] = gamma;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["has_weight"] = has_weight;
    // parsed after the op, which has validated it (and every other argument first)
    detail::save_enum(ctx, "reduction",
                      detail::parse_choice(focal_op_prefix(kKind), "reduction", reduction, kReductions));
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<FocalLossBackwardFn>(kBackwardName);
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward(kOpName, grad_output);
    const variable_list saved = ctx->get_saved_variables();
    std::optional<at::Tensor> weight;
    if (ctx->saved_data["has_weight"].toBool()) {
      weight = saved[2];
    }
    const Reduction reduction = detail::saved_enum<Reduction>(ctx, "reduction");
    at::Tensor grad_input =
        backward_op.call(grad_output, saved[0], saved[1], ctx->saved_data["gamma"].toDouble(),
                         ctx->saved_data["alpha"].toDouble(), weight, detail::choice_name(reduction, kReductions));
    // Gradients for (input, target, gamma, alpha, weight, reduction).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

template <FocalKind kKind>
at::Tensor focal_loss_autograd(const at::Tensor& input, const at::Tensor& target, double gamma, double alpha,
                               const std::optional<at::Tensor>& weight, c10::string_view reduction) {
  return FocalLossFunction<kKind>::apply(input, target, gamma, alpha, weight, reduction);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  using mmops::FocalKind;
  m.impl("sigmoid_focal_loss", &mmops::focal_loss_autograd<FocalKind::Sigmoid>);
  m.impl("softmax_focal_loss", &mmops::focal_loss_autograd<FocalKind::Softmax>);
}
