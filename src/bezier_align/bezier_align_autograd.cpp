// Autograd of bezier_align, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python. Differentiable in input; rois get no
// gradient (as mmcv).

#include "bezier_align/bezier_align_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

const auto& bezier_align_op() {
  static const auto op = detail::op_handle<BezierAlignFn>("mmops::bezier_align");
  return op;
}

class BezierAlignFunction : public torch::autograd::Function<BezierAlignFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio,
                            bool aligned) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = bezier_align_op().call(input, rois, output_size, spatial_scale, sampling_ratio, aligned);
    ctx->save_for_backward({rois});
    detail::save_sizes(ctx, "input_shape", input.sym_sizes());
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["aligned"] = aligned;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<BezierAlignBackwardFn>("mmops::_bezier_align_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::bezier_align", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad_input = backward_op.call(
        grad_output, saved[0], detail::saved_sizes(ctx, "input_shape"), ctx->saved_data["spatial_scale"].toDouble(),
        ctx->saved_data["sampling_ratio"].toInt(), ctx->saved_data["aligned"].toBool());
    // Gradients for (input, rois, output_size, spatial_scale, sampling_ratio, aligned).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor bezier_align_autograd(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                                 double spatial_scale, int64_t sampling_ratio, bool aligned) {
  if (!detail::needs_grad({input})) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return bezier_align_op().call(input, rois, output_size, spatial_scale, sampling_ratio, aligned);
  }
  return BezierAlignFunction::apply(input, rois, output_size, spatial_scale, sampling_ratio, aligned);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("bezier_align", &mmops::bezier_align_autograd);
}
