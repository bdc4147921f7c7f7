// Autograd of border_align, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python. Differentiable in input; boxes get no
// gradient (as mmcv).

#include "border_align/border_align_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class BorderAlignFunction : public torch::autograd::Function<BorderAlignFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size) {
    static const auto forward_op = detail::op_handle<BorderAlignForwardFn>("mmops::_border_align_forward");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [output, argmax_idx] = forward_op.call(input, boxes, pool_size);
    ctx->save_for_backward({boxes, argmax_idx});
    detail::save_sizes(ctx, "input_size", input.sym_sizes());
    ctx->saved_data["pool_size"] = pool_size;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<BorderAlignBackwardFn>("mmops::_border_align_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::border_align", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad_input = backward_op.call(grad_output, saved[0], saved[1], ctx->saved_data["pool_size"].toInt(),
                                             detail::saved_sizes(ctx, "input_size"));
    // Gradients for (input, boxes, pool_size).
    return {grad_input, at::Tensor(), at::Tensor()};
  }
};

at::Tensor border_align_autograd(const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<BorderAlignFn>("mmops::border_align");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, boxes, pool_size);
  }
  return BorderAlignFunction::apply(input, boxes, pool_size);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("border_align", &mmops::border_align_autograd);
}
