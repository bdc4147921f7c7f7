// Autograd of carafe, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python.

#include "carafe/carafe_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class CarafeFunction : public torch::autograd::Function<CarafeFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& features, const at::Tensor& masks,
                            int64_t kernel_size, int64_t group_size, int64_t scale_factor) {
    static const auto forward_op = detail::op_handle<CarafeFn>("mmops::carafe");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = forward_op.call(features, masks, kernel_size, group_size, scale_factor);
    ctx->save_for_backward({features, masks});
    ctx->saved_data["kernel_size"] = kernel_size;
    ctx->saved_data["group_size"] = group_size;
    ctx->saved_data["scale_factor"] = scale_factor;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<CarafeBackwardFn>("mmops::_carafe_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::carafe", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    auto [grad_features, grad_masks] =
        backward_op.call(grad_output, saved[0], saved[1], ctx->saved_data["kernel_size"].toInt(),
                         ctx->saved_data["group_size"].toInt(), ctx->saved_data["scale_factor"].toInt());
    // Gradients for (features, masks, kernel_size, group_size, scale_factor).
    return {grad_features, grad_masks, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor carafe_autograd(const at::Tensor& features, const at::Tensor& masks, int64_t kernel_size, int64_t group_size,
                           int64_t scale_factor) {
  return CarafeFunction::apply(features, masks, kernel_size, group_size, scale_factor);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("carafe", &mmops::carafe_autograd);
}
