// Autograd of correlation, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python. Differentiable in input1 and input2.

#include "correlation/correlation_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

// The int[2] options are saved as int lists, max_displacement as an int.
class CorrelationFunction : public torch::autograd::Function<CorrelationFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input1, const at::Tensor& input2,
                            c10::IntArrayRef kernel_size, int64_t max_displacement, c10::IntArrayRef stride,
                            c10::IntArrayRef padding, c10::IntArrayRef dilation, c10::IntArrayRef dilation_patch) {
    static const auto op = detail::op_handle<CorrelationFn>("mmops::correlation");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({input1, input2});
    ctx->saved_data["kernel_size"] = kernel_size.vec();
    ctx->saved_data["max_displacement"] = max_displacement;
    ctx->saved_data["stride"] = stride.vec();
    ctx->saved_data["padding"] = padding.vec();
    ctx->saved_data["dilation"] = dilation.vec();
    ctx->saved_data["dilation_patch"] = dilation_patch.vec();
    return op.call(input1, input2, kernel_size, max_displacement, stride, padding, dilation, dilation_patch);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<CorrelationBackwardFn>("mmops::_correlation_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::correlation", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    auto list = [&](const char* key) { return ctx->saved_data[key].toIntVector(); };
    const std::vector<int64_t> kernel_size = list("kernel_size"), stride = list("stride"), padding = list("padding"),
                               dilation = list("dilation"), dilation_patch = list("dilation_patch");
    auto [grad1, grad2] =
        backward_op.call(grad_output, saved[0], saved[1], kernel_size, ctx->saved_data["max_displacement"].toInt(),
                         stride, padding, dilation, dilation_patch);
    // Gradients for (input1, input2, kernel_size, max_displacement, stride, padding, dilation, dilation_patch).
    return {grad1, grad2, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor correlation_autograd(const at::Tensor& input1, const at::Tensor& input2, c10::IntArrayRef kernel_size,
                                int64_t max_displacement, c10::IntArrayRef stride, c10::IntArrayRef padding,
                                c10::IntArrayRef dilation, c10::IntArrayRef dilation_patch) {
  if (!detail::needs_grad({input1, input2})) {
    static const auto op = detail::op_handle<CorrelationFn>("mmops::correlation");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input1, input2, kernel_size, max_displacement, stride, padding, dilation, dilation_patch);
  }
  return CorrelationFunction::apply(input1, input2, kernel_size, max_displacement, stride, padding, dilation,
                                    dilation_patch);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("correlation", &mmops::correlation_autograd);
}
