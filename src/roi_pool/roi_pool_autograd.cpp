// Autograd of roi_pool, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python.

#include "roi_pool/roi_pool_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class RoIPoolFunction : public torch::autograd::Function<RoIPoolFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale) {
    static const auto forward_op = detail::op_handle<RoIPoolForwardFn>("mmops::_roi_pool_forward");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [output, argmax] = forward_op.call(input, rois, output_size, spatial_scale);
    ctx->save_for_backward({rois, argmax});
    detail::save_sizes(ctx, "input_size", input.sym_sizes());
    ctx->saved_data["spatial_scale"] = spatial_scale;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<RoIPoolBackwardFn>("mmops::_roi_pool_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::roi_pool", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad_input = backward_op.call(grad_output, saved[0], saved[1], detail::saved_sizes(ctx, "input_size"),
                                             ctx->saved_data["spatial_scale"].toDouble());
    // Gradients for (input, rois, output_size, spatial_scale).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor roi_pool_autograd(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                             double spatial_scale) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<RoIPoolFn>("mmops::roi_pool");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, rois, output_size, spatial_scale);
  }
  return RoIPoolFunction::apply(input, rois, output_size, spatial_scale);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("roi_pool", &mmops::roi_pool_autograd);
}
