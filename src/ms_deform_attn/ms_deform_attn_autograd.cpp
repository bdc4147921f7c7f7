// Autograd of ms_deform_attn, in C++ so that backward works from C++ programs
// and from TorchScript loaded without Python. Gradients flow to value,
// sampling_locations and attention_weights (spatial_shapes and
// level_start_index are integer data).

#include "ms_deform_attn/ms_deform_attn_ops.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class MsDeformAttnFunction : public torch::autograd::Function<MsDeformAttnFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& value, const at::Tensor& spatial_shapes,
                            const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                            const at::Tensor& attention_weights) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = ops::ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations,
                                            attention_weights);
    ctx->save_for_backward({value, spatial_shapes, level_start_index, sampling_locations, attention_weights});
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    // The backward is not differentiated again; refuse instead of returning a
    // silently wrong zero.
    TORCH_CHECK(!(grad_output.requires_grad() && at::GradMode::is_enabled()),
                "mmops::ms_deform_attn: double backward is not implemented");
    const variable_list saved = ctx->get_saved_variables();
    auto [grad_value, grad_loc, grad_attn] =
        ops::ms_deform_attn_backward(grad_output, saved[0], saved[1], saved[2], saved[3], saved[4]);
    // Gradients for (value, spatial_shapes, level_start_index, sampling_locations, attention_weights).
    return {grad_value, at::Tensor(), at::Tensor(), grad_loc, grad_attn};
  }
};

at::Tensor ms_deform_attn_autograd(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                   const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                   const at::Tensor& attention_weights) {
  return MsDeformAttnFunction::apply(value, spatial_shapes, level_start_index, sampling_locations,
                                     attention_weights);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("ms_deform_attn", &mmops::ms_deform_attn_autograd);
}
