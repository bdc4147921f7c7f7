// Autograd of roiaware_pool3d (w.r.t. pts_feature; rois and pts only place
// the points), in C++ so that backward works from C++ programs and from
// TorchScript loaded without Python.

#include "roiaware_pool3d/roiaware_pool3d_ops.h"

#include "common/autograd_utils.h"
#include "common/check_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include <string>

namespace mmops {
namespace {

class RoIAwarePool3dFunction : public torch::autograd::Function<RoIAwarePool3dFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rois, const at::Tensor& pts,
                            const at::Tensor& pts_feature, c10::SymIntArrayRef out_size, int64_t max_pts_per_voxel,
                            c10::string_view mode) {
    static const auto forward_op = detail::op_handle<RoIAwarePool3dForwardFn>("mmops::_roiaware_pool3d_forward");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [output, argmax, point_voxels, voxel_counts] =
        forward_op.call(rois, pts, pts_feature, out_size, max_pts_per_voxel, mode);
    ctx->save_for_backward({argmax, point_voxels, voxel_counts});
    detail::save_enum(ctx, "mode", detail::parse_choice(kRoIAwarePool3dOp, "mode", mode, detail::kRoIAwarePoolModes));
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<RoIAwarePool3dBackwardFn>("mmops::_roiaware_pool3d_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::roiaware_pool3d", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    const char* mode =
        detail::choice_name(detail::saved_enum<RoIAwarePoolMode>(ctx, "mode"), detail::kRoIAwarePoolModes);
    at::Tensor grad_feature = backward_op.call(grad_output, saved[0], saved[1], saved[2], mode);
    // Gradients for (rois, pts, pts_feature, out_size, max_pts_per_voxel, mode).
    return {at::Tensor(), at::Tensor(), grad_feature, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor roiaware_pool3d_autograd(const at::Tensor& rois, const at::Tensor& pts, const at::Tensor& pts_feature,
                                    c10::SymIntArrayRef out_size, int64_t max_pts_per_voxel, c10::string_view mode) {
  if (!detail::needs_grad({pts_feature})) {
    static const auto op = detail::op_handle<RoIAwarePool3dFn>("mmops::roiaware_pool3d");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(rois, pts, pts_feature, out_size, max_pts_per_voxel, mode);
  }
  return RoIAwarePool3dFunction::apply(rois, pts, pts_feature, out_size, max_pts_per_voxel, mode);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("roiaware_pool3d", &mmops::roiaware_pool3d_autograd);
}
