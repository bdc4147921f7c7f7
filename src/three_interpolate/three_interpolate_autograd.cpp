// Autograd of three_interpolate, in C++ so that backward works from C++
// programs and from TorchScript loaded without Python. Gradients reach
// features and weight (mmcv's reach features only); indices are integers.

#include "three_interpolate/three_interpolate_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class ThreeInterpolateFunction : public torch::autograd::Function<ThreeInterpolateFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& features, const at::Tensor& indices,
                            const at::Tensor& weight) {
    static const auto op = detail::op_handle<ThreeInterpolateFn>("mmops::three_interpolate");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({features, indices, weight});
    return op.call(features, indices, weight);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<ThreeInterpolateBackwardFn>("mmops::_three_interpolate_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::three_interpolate", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    auto [grad_features, grad_weight] = backward_op.call(grad_output, saved[0], saved[1], saved[2]);
    // Gradients for (features, indices, weight).
    return {grad_features, at::Tensor(), grad_weight};
  }
};

at::Tensor three_interpolate_autograd(const at::Tensor& features, const at::Tensor& indices, const at::Tensor& weight) {
  if (!detail::needs_grad({features, weight})) {
    static const auto op = detail::op_handle<ThreeInterpolateFn>("mmops::three_interpolate");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(features, indices, weight);
  }
  return ThreeInterpolateFunction::apply(features, indices, weight);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("three_interpolate", &mmops::three_interpolate_autograd);
}
