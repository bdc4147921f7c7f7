// Autograd of riroi_align_rotated, in C++ so that backward works from C++
// programs and from TorchScript loaded without Python. rois get no gradient
// (as mmcv).

#include "riroi_align_rotated/riroi_align_rotated_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class RiRoIAlignRotatedFunction : public torch::autograd::Function<RiRoIAlignRotatedFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& features, const at::Tensor& rois,
                            c10::SymIntArrayRef out_size, double spatial_scale, int64_t num_samples,
                            int64_t num_orientations, bool clockwise) {
    static const auto op = detail::op_handle<RiRoIAlignRotatedFn>("mmops::riroi_align_rotated");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(features, rois, out_size, spatial_scale, num_samples, num_orientations, clockwise);
    ctx->save_for_backward({rois});
    detail::save_sizes(ctx, "input_size", features.sym_sizes());
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["num_samples"] = num_samples;
    ctx->saved_data["num_orientations"] = num_orientations;
    ctx->saved_data["clockwise"] = clockwise;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op =
        detail::op_handle<RiRoIAlignRotatedBackwardFn>("mmops::_riroi_align_rotated_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::riroi_align_rotated", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad_input =
        backward_op.call(grad_output, saved[0], detail::saved_sizes(ctx, "input_size"),
                         ctx->saved_data["spatial_scale"].toDouble(), ctx->saved_data["num_samples"].toInt(),
                         ctx->saved_data["num_orientations"].toInt(), ctx->saved_data["clockwise"].toBool());
    // Gradients for (input, rois, out_size, spatial_scale, num_samples, num_orientations, clockwise).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor riroi_align_rotated_autograd(const at::Tensor& features, const at::Tensor& rois,
                                        c10::SymIntArrayRef out_size, double spatial_scale, int64_t num_samples,
                                        int64_t num_orientations, bool clockwise) {
  if (!detail::needs_grad({features})) {
    static const auto op = detail::op_handle<RiRoIAlignRotatedFn>("mmops::riroi_align_rotated");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(features, rois, out_size, spatial_scale, num_samples, num_orientations, clockwise);
  }
  return RiRoIAlignRotatedFunction::apply(features, rois, out_size, spatial_scale, num_samples, num_orientations,
                                          clockwise);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("riroi_align_rotated", &mmops::riroi_align_rotated_autograd);
}
