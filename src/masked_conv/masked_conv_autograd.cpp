// Autograd of masked_conv2d, in C++ so that backward works from C++ programs
// and from TorchScript loaded without Python. Gradients go to input, weight
// and bias (mmcv's op has none); the mask gets none.

#include "masked_conv/masked_conv_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class MaskedConv2dFunction : public torch::autograd::Function<MaskedConv2dFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& mask,
                            const at::Tensor& weight, const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                            at::IntArrayRef stride) {
    static const auto forward_op = detail::op_handle<MaskedConv2dFn>("mmops::masked_conv2d");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = forward_op.call(input, mask, weight, bias, padding, stride);
    ctx->save_for_backward({input, mask, weight});
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    ctx->saved_data["padding"] = padding.vec();
    ctx->saved_data["stride"] = stride.vec();
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<MaskedConv2dBackwardFn>("mmops::_masked_conv2d_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::masked_conv2d", grad_output);
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const variable_list saved = ctx->get_saved_variables();
    // Edges are the tensor arguments that were given: input, mask, weight, [bias].
    const bool need_input = ctx->needs_input_grad(0);
    const bool need_weight = ctx->needs_input_grad(2);
    const bool need_bias = has_bias && ctx->needs_input_grad(3);
    const std::vector<int64_t> padding = ctx->saved_data["padding"].toIntVector();
    const std::vector<int64_t> stride = ctx->saved_data["stride"].toIntVector();
    auto [grad_input, grad_weight, grad_bias] = backward_op.call(grad_output, saved[0], saved[1], saved[2], padding,
                                                                 stride, {need_input, need_weight, need_bias});
    auto keep = [](bool needed, const at::Tensor& g) { return needed ? g : at::Tensor(); };
    // One entry per forward argument: (input, mask, weight, bias, padding, stride).
    return {keep(need_input, grad_input), at::Tensor(), keep(need_weight, grad_weight),
            keep(need_bias, grad_bias),   at::Tensor(), at::Tensor()};
  }
};

at::Tensor masked_conv2d_autograd(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                                  at::IntArrayRef stride) {
  return MaskedConv2dFunction::apply(input, mask, weight, bias, padding, stride);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("masked_conv2d", &mmops::masked_conv2d_autograd);
}
