// Autograd of active_rotated_filter, in C++ so that backward works from C++
// programs and from TorchScript loaded without Python. Differentiable in input.

#include "active_rotated_filter/active_rotated_filter_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class ActiveRotatedFilterFunction : public torch::autograd::Function<ActiveRotatedFilterFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& indices) {
    static const auto op = detail::op_handle<ActiveRotatedFilterFn>("mmops::active_rotated_filter");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(input, indices);
    ctx->save_for_backward({indices});
    detail::save_sizes(ctx, "input_size", input.sym_sizes());
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op =
        detail::op_handle<ActiveRotatedFilterBackwardFn>("mmops::_active_rotated_filter_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::active_rotated_filter", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad = backward_op.call(grad_output, saved[0], detail::saved_sizes(ctx, "input_size"));
    // Gradients for (input, indices).
    return {grad, at::Tensor()};
  }
};

at::Tensor active_rotated_filter_autograd(const at::Tensor& input, const at::Tensor& indices) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<ActiveRotatedFilterFn>("mmops::active_rotated_filter");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, indices);
  }
  return ActiveRotatedFilterFunction::apply(input, indices);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("active_rotated_filter", &mmops::active_rotated_filter_autograd);
}
