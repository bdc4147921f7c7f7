// Autograd of roi_align_rotated, in C++ so that backward works from C++
// programs and from TorchScript loaded without Python. rois get no gradient
// (as mmcv).

#include "roi_align_rotated/roi_align_rotated_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class RoIAlignRotatedFunction : public torch::autograd::Function<RoIAlignRotatedFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio, bool aligned,
                            bool clockwise) {
    static const auto op = detail::op_handle<RoIAlignRotatedFn>("mmops::roi_align_rotated");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(input, rois, output_size, spatial_scale, sampling_ratio, aligned, clockwise);
    ctx->save_for_backward({rois});
    detail::save_sizes(ctx, "input_size", input.sym_sizes());
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["aligned"] = aligned;
    ctx->saved_data["clockwise"] = clockwise;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<RoIAlignRotatedBackwardFn>("mmops::_roi_align_rotated_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::roi_align_rotated", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad_input =
        backward_op.call(grad_output, saved[0], detail::saved_sizes(ctx, "input_size"),
                         ctx->saved_data["spatial_scale"].toDouble(), ctx->saved_data["sampling_ratio"].toInt(),
                         ctx->saved_data["aligned"].toBool(), ctx->saved_data["clockwise"].toBool());
    // Gradients for (input, rois, output_size, spatial_scale, sampling_ratio, aligned, clockwise).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor roi_align_rotated_autograd(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                                      double spatial_scale, int64_t sampling_ratio, bool aligned, bool clockwise) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<RoIAlignRotatedFn>("mmops::roi_align_rotated");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, rois, output_size, spatial_scale, sampling_ratio, aligned, clockwise);
  }
  return RoIAlignRotatedFunction::apply(input, rois, output_size, spatial_scale, sampling_ratio, aligned, clockwise);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("roi_align_rotated", &mmops::roi_align_rotated_autograd);
}
