// Autograd of bbox_overlaps (w.r.t. both box sets), in C++ so that backward
// works from C++ programs and from TorchScript loaded without Python.

#include "bbox_overlaps/bbox_overlaps_ops.h"
#include "common/autograd_utils.h"
#include "common/check_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class BBoxOverlapsFunction : public torch::autograd::Function<BBoxOverlapsFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& bboxes1, const at::Tensor& bboxes2,
                            c10::string_view mode, bool aligned, int64_t offset) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto op = detail::op_handle<BBoxOverlapsFn>("mmops::bbox_overlaps");
    at::Tensor out = op.call(bboxes1, bboxes2, mode, aligned, offset);
    ctx->save_for_backward({bboxes1, bboxes2});
    detail::save_enum(ctx, "mode", detail::parse_overlap_mode(mode));
    ctx->saved_data["aligned"] = aligned;
    ctx->saved_data["offset"] = offset;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::bbox_overlaps", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    static const auto backward_op = detail::op_handle<BBoxOverlapsBackwardFn>("mmops::_bbox_overlaps_backward");
    const char* mode = detail::choice_name(detail::saved_enum<OverlapMode>(ctx, "mode"), detail::kOverlapModes);
    auto [grad1, grad2] = backward_op.call(grad_output, saved[0], saved[1], mode, ctx->saved_data["aligned"].toBool(),
                                           ctx->saved_data["offset"].toInt());
    // Gradients for (bboxes1, bboxes2, mode, aligned, offset).
    return {grad1, grad2, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor bbox_overlaps_autograd(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode,
                                  bool aligned, int64_t offset) {
  return BBoxOverlapsFunction::apply(bboxes1, bboxes2, mode, aligned, offset);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("bbox_overlaps", &mmops::bbox_overlaps_autograd);
}
