// Autograd of deform_conv2d and modulated_deform_conv2d, in C++ so that
// backward works from C++ programs and from TorchScript loaded without Python.
// One Function with an optional mask serves both ops; its backward calls
// mmops::_deform_conv2d_backward for the gradients that are needed.

#include "common/autograd_utils.h"
#include "common/dispatch.h"
#include "deform_conv/deform_conv_ops.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

const char* op_name(bool has_mask) {
  return has_mask ? "mmops::modulated_deform_conv2d" : "mmops::deform_conv2d";
}

class DeformConv2dFunction : public torch::autograd::Function<DeformConv2dFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& offset,
                            const std::optional<at::Tensor>& mask, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                            c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups,
                            int64_t deform_groups) {
    static const auto v1 = detail::op_handle<DeformConv2dFn>("mmops::deform_conv2d");
    static const auto v2 = detail::op_handle<ModulatedDeformConv2dFn>("mmops::modulated_deform_conv2d");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    const bool has_mask = mask.has_value() && mask->defined();
    const bool has_bias = bias.has_value() && bias->defined();
    at::Tensor output =
        has_mask ? v2.call(input, offset, *mask, weight, bias, stride, padding, dilation, groups, deform_groups)
                 : v1.call(input, offset, weight, bias, stride, padding, dilation, groups, deform_groups);
    ctx->save_for_backward({input, offset, has_mask ? *mask : at::Tensor(), weight});
    ctx->saved_data["has_mask"] = has_mask;
    ctx->saved_data["has_bias"] = has_bias;
    detail::save_sizes(ctx, "stride", stride);
    detail::save_sizes(ctx, "padding", padding);
    detail::save_sizes(ctx, "dilation", dilation);
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["deform_groups"] = deform_groups;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<DeformConv2dBackwardFn>("mmops::_deform_conv2d_backward");
    const bool has_mask = ctx->saved_data["has_mask"].toBool();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward(op_name(has_mask), grad_output);
    const variable_list saved = ctx->get_saved_variables();
    // Edges are the tensor arguments that were given: input, offset, [mask], weight, [bias].
    size_t edge = 0;
    const bool need_input = ctx->needs_input_grad(edge++);
    const bool need_offset = ctx->needs_input_grad(edge++);
    const bool need_mask = has_mask && ctx->needs_input_grad(edge++);
    const bool need_weight = ctx->needs_input_grad(edge++);
    const bool need_bias = has_bias && ctx->needs_input_grad(edge++);
    std::optional<at::Tensor> mask;
    if (has_mask) {
      mask = saved[2];
    }
    auto [grad_input, grad_offset, grad_mask, grad_weight, grad_bias] = backward_op.call(
        grad_output, saved[0], saved[1], mask, saved[3], detail::saved_sizes(ctx, "stride"),
        detail::saved_sizes(ctx, "padding"), detail::saved_sizes(ctx, "dilation"), ctx->saved_data["groups"].toInt(),
        ctx->saved_data["deform_groups"].toInt(), {need_input, need_offset, need_mask, need_weight, need_bias});
    auto keep = [](bool needed, const at::Tensor& g) { return needed ? g : at::Tensor(); };
    // One entry per forward argument: (input, offset, mask, weight, bias, stride,
    // padding, dilation, groups, deform_groups); undefined where none is needed.
    return {keep(need_input, grad_input),
            keep(need_offset, grad_offset),
            keep(need_mask, grad_mask),
            keep(need_weight, grad_weight),
            keep(need_bias, grad_bias),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

at::Tensor deform_conv2d_autograd(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                  c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups,
                                  int64_t deform_groups) {
  return DeformConv2dFunction::apply(input, offset, std::optional<at::Tensor>(), weight, bias, stride, padding,
                                     dilation, groups, deform_groups);
}

at::Tensor modulated_deform_conv2d_autograd(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                                            const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                            c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                            c10::SymIntArrayRef dilation, int64_t groups, int64_t deform_groups) {
  return DeformConv2dFunction::apply(input, offset, std::optional<at::Tensor>(mask), weight, bias, stride, padding,
                                     dilation, groups, deform_groups);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("deform_conv2d", &mmops::deform_conv2d_autograd);
  m.impl("modulated_deform_conv2d", &mmops::modulated_deform_conv2d_autograd);
}
