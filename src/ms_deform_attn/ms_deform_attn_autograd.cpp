// Autograd of ms_deform_attn, in C++ so that backward works from C++ programs
// and from TorchScript loaded without Python. Gradients flow to value,
// sampling_locations and attention_weights (spatial_shapes and
// level_start_index are integer data).

#include "common/autograd_utils.h"
#include "common/dispatch.h"
#include "ms_deform_attn/ms_deform_attn_ops.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class MsDeformAttnFunction : public torch::autograd::Function<MsDeformAttnFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& value, const at::Tensor& spatial_shapes,
                            const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                            const at::Tensor& attention_weights) {
    static const auto op = detail::op_handle<MsDeformAttnFn>("mmops::ms_deform_attn");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
    ctx->save_for_backward({value, spatial_shapes, level_start_index, sampling_locations, attention_weights});
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<MsDeformAttnBackwardFn>("mmops::_ms_deform_attn_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::ms_deform_attn", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    auto [grad_value, grad_loc, grad_attn] =
        backward_op.call(grad_output, saved[0], saved[1], saved[2], saved[3], saved[4]);
    // Gradients for (value, spatial_shapes, level_start_index, sampling_locations, attention_weights).
    return {grad_value, at::Tensor(), at::Tensor(), grad_loc, grad_attn};
  }
};

at::Tensor ms_deform_attn_autograd(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                   const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                   const at::Tensor& attention_weights) {
  return MsDeformAttnFunction::apply(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("ms_deform_attn", &mmops::ms_deform_attn_autograd);
}
