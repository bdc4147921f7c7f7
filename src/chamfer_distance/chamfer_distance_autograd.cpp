// Autograd of chamfer_distance, in C++ so that backward works from C++
// programs and from TorchScript loaded without Python. Differentiable in xyz1
// and xyz2 through dist1 and dist2 (the indices are not differentiable).

#include "chamfer_distance/chamfer_distance_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <ATen/ops/zeros_like.h>
#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

using Outputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

Outputs call_below_autograd(const at::Tensor& xyz1, const at::Tensor& xyz2) {
  static const auto op = detail::op_handle<ChamferDistanceFn>("mmops::chamfer_distance");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(xyz1, xyz2);
}

class ChamferDistanceFunction : public torch::autograd::Function<ChamferDistanceFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& xyz1, const at::Tensor& xyz2) {
    auto [dist1, dist2, idx1, idx2] = call_below_autograd(xyz1, xyz2);
    ctx->save_for_backward({xyz1, xyz2, idx1, idx2});
    ctx->mark_non_differentiable({idx1, idx2});
    return {dist1, dist2, idx1, idx2};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<ChamferDistanceBackwardFn>("mmops::_chamfer_distance_backward");
    const variable_list saved = ctx->get_saved_variables();
    // an output that took no part in the loss has no gradient
    const at::Tensor g1 = grad_outputs[0].defined() ? grad_outputs[0] : at::zeros_like(saved[0].select(2, 0));
    const at::Tensor g2 = grad_outputs[1].defined() ? grad_outputs[1] : at::zeros_like(saved[1].select(2, 0));
    detail::refuse_double_backward("mmops::chamfer_distance", g1);
    detail::refuse_double_backward("mmops::chamfer_distance", g2);
    auto [grad1, grad2] = backward_op.call(saved[0], saved[1], saved[2], saved[3], g1, g2);
    return {grad1, grad2};
  }
};

Outputs chamfer_distance_autograd(const at::Tensor& xyz1, const at::Tensor& xyz2) {
  if (!detail::needs_grad({xyz1, xyz2})) {
    return call_below_autograd(xyz1, xyz2);
  }
  const variable_list out = ChamferDistanceFunction::apply(xyz1, xyz2);
  return {out[0], out[1], out[2], out[3]};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("chamfer_distance", &mmops::chamfer_distance_autograd);
}
