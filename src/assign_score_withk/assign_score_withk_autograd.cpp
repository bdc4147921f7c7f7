// Autograd of assign_score_withk, in C++ so that backward works from C++
// programs and from TorchScript loaded without Python. Differentiable in
// scores, point_features and center_features.

#include "assign_score_withk/assign_score_withk_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include <string>

namespace mmops {
namespace {

at::Tensor call_below_autograd(const at::Tensor& scores, const at::Tensor& point_features,
                               const at::Tensor& center_features, const at::Tensor& knn_idx,
                               c10::string_view aggregate) {
  static const auto op = detail::op_handle<AssignScoreWithKFn>("mmops::assign_score_withk");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(scores, point_features, center_features, knn_idx, aggregate);
}

class AssignScoreWithKFunction : public torch::autograd::Function<AssignScoreWithKFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& scores, const at::Tensor& point_features,
                            const at::Tensor& center_features, const at::Tensor& knn_idx,
                            const std::string& aggregate) {
    at::Tensor output = call_below_autograd(scores, point_features, center_features, knn_idx, aggregate);
    ctx->save_for_backward({scores, point_features, center_features, knn_idx});
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op =
        detail::op_handle<AssignScoreWithKBackwardFn>("mmops::_assign_score_withk_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::assign_score_withk", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    auto [grad_scores, grad_points, grad_centers] =
        backward_op.call(grad_output, saved[0], saved[1], saved[2], saved[3]);
    // Gradients for (scores, point_features, center_features, knn_idx, aggregate).
    return {grad_scores, grad_points, grad_centers, at::Tensor(), at::Tensor()};
  }
};

at::Tensor assign_score_withk_autograd(const at::Tensor& scores, const at::Tensor& point_features,
                                       const at::Tensor& center_features, const at::Tensor& knn_idx,
                                       c10::string_view aggregate) {
  if (!detail::needs_grad({scores, point_features, center_features})) {
    return call_below_autograd(scores, point_features, center_features, knn_idx, aggregate);
  }
  return AssignScoreWithKFunction::apply(scores, point_features, center_features, knn_idx, std::string(aggregate));
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("assign_score_withk", &mmops::assign_score_withk_autograd);
}
