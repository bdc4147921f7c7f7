// Autograd of ca_weight and ca_map, in C++ so that backward works from C++
// programs and from TorchScript loaded without Python. Each op is
// differentiable in both tensors; the backward schemas return both gradients.

#include "cc_attention/cc_attention_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class CaWeightFunction : public torch::autograd::Function<CaWeightFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& t, const at::Tensor& f) {
    static const auto op = detail::op_handle<CaWeightFn>("mmops::ca_weight");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor weight = op.call(t, f);
    ctx->save_for_backward({t, f});
    return weight;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<CaWeightBackwardFn>("mmops::_ca_weight_backward");
    const at::Tensor& grad_weight = grad_outputs[0];
    detail::refuse_double_backward("mmops::ca_weight", grad_weight);
    const variable_list saved = ctx->get_saved_variables();
    auto [grad_t, grad_f] = backward_op.call(grad_weight, saved[0], saved[1]);
    return {grad_t, grad_f};
  }
};

class CaMapFunction : public torch::autograd::Function<CaMapFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& weight, const at::Tensor& g) {
    static const auto op = detail::op_handle<CaMapFn>("mmops::ca_map");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor out = op.call(weight, g);
    ctx->save_for_backward({weight, g});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<CaMapBackwardFn>("mmops::_ca_map_backward");
    const at::Tensor& grad_out = grad_outputs[0];
    detail::refuse_double_backward("mmops::ca_map", grad_out);
    const variable_list saved = ctx->get_saved_variables();
    auto [grad_weight, grad_g] = backward_op.call(grad_out, saved[0], saved[1]);
    return {grad_weight, grad_g};
  }
};

at::Tensor ca_weight_autograd(const at::Tensor& t, const at::Tensor& f) {
  if (!detail::needs_grad({t, f})) {
    static const auto op = detail::op_handle<CaWeightFn>("mmops::ca_weight");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(t, f);
  }
  return CaWeightFunction::apply(t, f);
}

at::Tensor ca_map_autograd(const at::Tensor& weight, const at::Tensor& g) {
  if (!detail::needs_grad({weight, g})) {
    static const auto op = detail::op_handle<CaMapFn>("mmops::ca_map");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(weight, g);
  }
  return CaMapFunction::apply(weight, g);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("ca_weight", &mmops::ca_weight_autograd);
  m.impl("ca_map", &mmops::ca_map_autograd);
}
