// Autograd of diff_iou_rotated_2d / _3d (w.r.t. both box sets), in C++ so
// that backward works from C++ programs and TorchScript loaded without Python.
// The backward recomputes the intersection polygon from the saved boxes.

#include "common/autograd_utils.h"
#include "common/dispatch.h"
#include "diff_iou_rotated/diff_iou_rotated_ops.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

const char* forward_name(bool three_d) {
  return three_d ? "mmops::diff_iou_rotated_3d" : "mmops::diff_iou_rotated_2d";
}

class DiffIouRotatedFunction : public torch::autograd::Function<DiffIouRotatedFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& box1, const at::Tensor& box2, bool three_d) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto op2 = detail::op_handle<DiffIouRotatedFn>("mmops::diff_iou_rotated_2d");
    static const auto op3 = detail::op_handle<DiffIouRotatedFn>("mmops::diff_iou_rotated_3d");
    at::Tensor out = three_d ? op3.call(box1, box2) : op2.call(box1, box2);
    ctx->save_for_backward({box1, box2});
    ctx->saved_data["three_d"] = three_d;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const bool three_d = ctx->saved_data["three_d"].toBool();
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward(forward_name(three_d), grad_output);
    const variable_list saved = ctx->get_saved_variables();
    static const auto back2 = detail::op_handle<DiffIouRotatedBackwardFn>("mmops::_diff_iou_rotated_2d_backward");
    static const auto back3 = detail::op_handle<DiffIouRotatedBackwardFn>("mmops::_diff_iou_rotated_3d_backward");
    auto [grad1, grad2] =
        three_d ? back3.call(grad_output, saved[0], saved[1]) : back2.call(grad_output, saved[0], saved[1]);
    // Gradients for (box1, box2, three_d).
    return {grad1, grad2, at::Tensor()};
  }
};

at::Tensor diff_iou_rotated_2d_autograd(const at::Tensor& box1, const at::Tensor& box2) {
  return DiffIouRotatedFunction::apply(box1, box2, false);
}

at::Tensor diff_iou_rotated_3d_autograd(const at::Tensor& box3d1, const at::Tensor& box3d2) {
  return DiffIouRotatedFunction::apply(box3d1, box3d2, true);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("diff_iou_rotated_2d", &mmops::diff_iou_rotated_2d_autograd);
  m.impl("diff_iou_rotated_3d", &mmops::diff_iou_rotated_3d_autograd);
}
