// Autograd of prroi_pool, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python. Both input and the roi coordinates
// are differentiable; each gradient is computed only when asked for.

#include "prroi_pool/prroi_pool_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class PrRoIPoolFunction : public torch::autograd::Function<PrRoIPoolFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale) {
    static const auto op = detail::op_handle<PrRoIPoolFn>("mmops::prroi_pool");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(input, rois, output_size, spatial_scale);
    ctx->save_for_backward({input, rois});
    ctx->saved_data["spatial_scale"] = spatial_scale;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto input_op = detail::op_handle<PrRoIPoolInputBackwardFn>("mmops::_prroi_pool_input_backward");
    static const auto rois_op = detail::op_handle<PrRoIPoolRoisBackwardFn>("mmops::_prroi_pool_rois_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::prroi_pool", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    const double spatial_scale = ctx->saved_data["spatial_scale"].toDouble();
    at::Tensor grad_input, grad_rois;
    if (ctx->needs_input_grad(0)) {
      grad_input = input_op.call(grad_output, saved[1], saved[0].sym_sizes(), spatial_scale);
    }
    if (ctx->needs_input_grad(1)) {
      grad_rois = rois_op.call(grad_output, saved[0], saved[1], spatial_scale);
    }
    // Gradients for (input, rois, output_size, spatial_scale).
    return {grad_input, grad_rois, at::Tensor(), at::Tensor()};
  }
};

at::Tensor prroi_pool_autograd(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                               double spatial_scale) {
  if (!detail::needs_grad({input, rois})) {
    static const auto op = detail::op_handle<PrRoIPoolFn>("mmops::prroi_pool");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, rois, output_size, spatial_scale);
  }
  return PrRoIPoolFunction::apply(input, rois, output_size, spatial_scale);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("prroi_pool", &mmops::prroi_pool_autograd);
}
