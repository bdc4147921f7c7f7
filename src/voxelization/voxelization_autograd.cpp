// Autograd of hard_voxelize, dynamic_voxelize and dynamic_scatter, in C++ so
// that backward works from C++ programs and from TorchScript loaded without
// Python. The voxelizations only move points into voxels: not differentiable.

#include "voxelization/voxelization_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

namespace mmops {
namespace {

class DynamicScatterFunction : public torch::autograd::Function<DynamicScatterFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& feats, const at::Tensor& coors,
                               c10::string_view reduce) {
    static const auto forward_op = detail::op_handle<DynamicScatterForwardFn>("mmops::_dynamic_scatter_forward");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [voxel_feats, voxel_coors, point2voxel, count, argmax] = forward_op.call(feats, coors, reduce);
    ctx->save_for_backward({point2voxel, count, argmax});
    detail::save_enum(ctx, "reduce", detail::check_dynamic_scatter(feats, coors, reduce));
    ctx->mark_non_differentiable({voxel_coors});
    // voxel_coors (int32) gets no gradient: without this the engine would fill
    // an [M, D] zero tensor for it on every backward.
    ctx->set_materialize_grads(false);
    return {voxel_feats, voxel_coors};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<DynamicScatterBackwardFn>("mmops::_dynamic_scatter_backward");
    const at::Tensor& grad = grad_outputs[0];
    if (!grad.defined()) { // no gradient reached voxel_feats: none for feats
      return {at::Tensor(), at::Tensor(), at::Tensor()};
    }
    detail::refuse_double_backward("mmops::dynamic_scatter", grad);
    const variable_list saved = ctx->get_saved_variables();
    const ScatterReduce reduce = detail::saved_enum<ScatterReduce>(ctx, "reduce");
    at::Tensor grad_feats = backward_op.call(grad, saved[0], saved[1], saved[2], detail::reduce_name(reduce));
    // Gradients for (feats, coors, reduce).
    return {grad_feats, at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> dynamic_scatter_autograd(const at::Tensor& feats, const at::Tensor& coors,
                                                            c10::string_view reduce) {
  if (!detail::needs_grad({feats})) {
    static const auto op = detail::op_handle<DynamicScatterFn>("mmops::dynamic_scatter");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(feats, coors, reduce);
  }
  const variable_list out = DynamicScatterFunction::apply(feats, coors, reduce);
  return {out[0], out[1]};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("dynamic_scatter", &mmops::dynamic_scatter_autograd);
  m.impl("hard_voxelize", torch::autograd::autogradNotImplementedFallback());
  m.impl("dynamic_voxelize", torch::autograd::autogradNotImplementedFallback());
}
