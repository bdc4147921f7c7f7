// Autograd of ps_roi_align and ps_roi_pool, in C++ so that backward works from
// C++ programs and from TorchScript loaded without Python. Differentiable in
// input; rois get no gradient (as torchvision). Nothing but rois and sizes is
// saved: the backward recomputes each output's input channel.

#include "ps_roi/ps_roi_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class PSRoIAlignFunction : public torch::autograd::Function<PSRoIAlignFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio) {
    static const auto op = detail::op_handle<PSRoIAlignFn>("mmops::ps_roi_align");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(input, rois, output_size, spatial_scale, sampling_ratio);
    ctx->save_for_backward({rois});
    detail::save_sizes(ctx, "input_size", input.sym_sizes());
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<PSRoIAlignBackwardFn>("mmops::_ps_roi_align_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::ps_roi_align", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad_input =
        backward_op.call(grad_output, saved[0], detail::saved_sizes(ctx, "input_size"),
                         ctx->saved_data["spatial_scale"].toDouble(), ctx->saved_data["sampling_ratio"].toInt());
    // Gradients for (input, rois, output_size, spatial_scale, sampling_ratio).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class PSRoIPoolFunction : public torch::autograd::Function<PSRoIPoolFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale) {
    static const auto op = detail::op_handle<PSRoIPoolFn>("mmops::ps_roi_pool");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(input, rois, output_size, spatial_scale);
    ctx->save_for_backward({rois});
    detail::save_sizes(ctx, "input_size", input.sym_sizes());
    ctx->saved_data["spatial_scale"] = spatial_scale;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<PSRoIPoolBackwardFn>("mmops::_ps_roi_pool_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::ps_roi_pool", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad_input = backward_op.call(grad_output, saved[0], detail::saved_sizes(ctx, "input_size"),
                                             ctx->saved_data["spatial_scale"].toDouble());
    // Gradients for (input, rois, output_size, spatial_scale).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor ps_roi_align_autograd(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                                 double spatial_scale, int64_t sampling_ratio) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<PSRoIAlignFn>("mmops::ps_roi_align");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, rois, output_size, spatial_scale, sampling_ratio);
  }
  return PSRoIAlignFunction::apply(input, rois, output_size, spatial_scale, sampling_ratio);
}

at::Tensor ps_roi_pool_autograd(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                                double spatial_scale) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<PSRoIPoolFn>("mmops::ps_roi_pool");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, rois, output_size, spatial_scale);
  }
  return PSRoIPoolFunction::apply(input, rois, output_size, spatial_scale);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("ps_roi_align", &mmops::ps_roi_align_autograd);
  m.impl("ps_roi_pool", &mmops::ps_roi_pool_autograd);
}
