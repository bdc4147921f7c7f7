// Autograd of corner_pool, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python. Differentiable in input; the
// backward recomputes the argmax from the saved input (no index tensor).

#include "corner_pool/corner_pool_ops.h"

#include "common/autograd_utils.h"
#include "common/check_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class CornerPoolFunction : public torch::autograd::Function<CornerPoolFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, c10::string_view mode) {
    static const auto op = detail::op_handle<CornerPoolFn>("mmops::corner_pool");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(input, mode);
    ctx->save_for_backward({input});
    detail::save_enum(ctx, "mode", detail::parse_choice(kCornerPoolOp, "mode", mode, detail::kCornerPoolModes));
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<CornerPoolBackwardFn>("mmops::_corner_pool_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::corner_pool", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    const char* mode = detail::choice_name(detail::saved_enum<CornerPoolMode>(ctx, "mode"), detail::kCornerPoolModes);
    // Gradients for (input, mode).
    return {backward_op.call(grad_output, saved[0], mode), at::Tensor()};
  }
};

at::Tensor corner_pool_autograd(const at::Tensor& input, c10::string_view mode) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<CornerPoolFn>("mmops::corner_pool");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, mode);
  }
  return CornerPoolFunction::apply(input, mode);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("corner_pool", &mmops::corner_pool_autograd);
}
