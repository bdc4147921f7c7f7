// Autograd of tin_shift, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python. Differentiable in input; shift (an
// integer tensor) gets no gradient. The gradient is the adjoint of the shift:
// grad_output moved by -shift (mmcv's backward moves it by +shift; see
// docs/ops/tin_shift.md).

#include "tin_shift/tin_shift_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class TinShiftFunction : public torch::autograd::Function<TinShiftFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& shift) {
    static const auto op = detail::op_handle<TinShiftFn>("mmops::tin_shift");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({shift});
    return op.call(input, shift);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<TinShiftBackwardFn>("mmops::_tin_shift_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::tin_shift", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    // Gradients for (input, shift).
    return {backward_op.call(grad_output, saved[0]), at::Tensor()};
  }
};

at::Tensor tin_shift_autograd(const at::Tensor& input, const at::Tensor& shift) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<TinShiftFn>("mmops::tin_shift");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, shift);
  }
  return TinShiftFunction::apply(input, shift);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("tin_shift", &mmops::tin_shift_autograd);
}
