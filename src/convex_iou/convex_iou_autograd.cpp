// Autograd: convex_giou is differentiable w.r.t. pointsets through its first
// output; the gradient is the second output (computed by the forward, as in
// mmcv), so backward is grad_giou[:, None] * grad. convex_iou has none.

#include "common/autograd_utils.h"
#include "common/dispatch.h"
#include "convex_iou/convex_iou_ops.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/zeros_like.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

namespace mmops {
namespace {

class ConvexGIoUFunction : public torch::autograd::Function<ConvexGIoUFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& pointsets, const at::Tensor& polygons) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto op = detail::op_handle<ConvexGIoUFn>("mmops::convex_giou");
    auto [giou, grad] = op.call(pointsets, polygons);
    ctx->save_for_backward({grad});
    ctx->mark_non_differentiable({grad});
    return {giou, grad};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_giou = grad_outputs[0];
    detail::refuse_double_backward("mmops::convex_giou", grad_giou);
    TORCH_CHECK(!ctx->needs_input_grad(1),
                "mmops::convex_giou: ", "is differentiable w.r.t. pointsets only, but polygons requires grad");
    const at::Tensor grad = ctx->get_saved_variables()[0];
    if (!grad_giou.defined()) {
      return {at::zeros_like(grad), at::Tensor()};
    }
    return {grad_giou.unsqueeze(1) * grad, at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> convex_giou_autograd(const at::Tensor& pointsets, const at::Tensor& polygons) {
  variable_list out = ConvexGIoUFunction::apply(pointsets, polygons);
  return {out[0], out[1]};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("convex_giou", &mmops::convex_giou_autograd);
  m.impl("convex_iou", torch::autograd::autogradNotImplementedFallback());
}
