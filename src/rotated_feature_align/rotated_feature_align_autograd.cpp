// Autograd of rotated_feature_align, in C++ so that backward works from C++
// programs and from TorchScript loaded without Python. Differentiable in
// features only (best_rbboxes gets no gradient, as in mmcv).

#include "rotated_feature_align/rotated_feature_align_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class RotatedFeatureAlignFunction : public torch::autograd::Function<RotatedFeatureAlignFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& features, const at::Tensor& best_rbboxes,
                            double spatial_scale, int64_t points) {
    static const auto op = detail::op_handle<RotatedFeatureAlignFn>("mmops::rotated_feature_align");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(features, best_rbboxes, spatial_scale, points);
    ctx->save_for_backward({best_rbboxes});
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["points"] = points;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op =
        detail::op_handle<RotatedFeatureAlignBackwardFn>("mmops::_rotated_feature_align_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::rotated_feature_align", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad = backward_op.call(grad_output, saved[0], ctx->saved_data["spatial_scale"].toDouble(),
                                       ctx->saved_data["points"].toInt());
    // Gradients for (features, best_rbboxes, spatial_scale, points).
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor rotated_feature_align_autograd(const at::Tensor& features, const at::Tensor& best_rbboxes,
                                          double spatial_scale, int64_t points) {
  if (!detail::needs_grad({features})) {
    static const auto op = detail::op_handle<RotatedFeatureAlignFn>("mmops::rotated_feature_align");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(features, best_rbboxes, spatial_scale, points);
  }
  return RotatedFeatureAlignFunction::apply(features, best_rbboxes, spatial_scale, points);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("rotated_feature_align", &mmops::rotated_feature_align_autograd);
}
