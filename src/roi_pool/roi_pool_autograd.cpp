// Autograd of roi_pool, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python.

#include "roi_pool/roi_pool_ops.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include <string>

namespace mmops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class RoIPoolFunction : public torch::autograd::Function<RoIPoolFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [output, argmax] = ops::roi_pool_forward(input, rois, output_size, spatial_scale);
    ctx->save_for_backward({rois, argmax});
    for (int64_t d = 0; d < 4; ++d) {
      ctx->saved_data["input_size_" + std::to_string(d)] = input.sym_size(d);
    }
    ctx->saved_data["spatial_scale"] = spatial_scale;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    // The backward is linear in grad_output; differentiating it again is not
    // implemented, so refuse instead of returning a silently wrong zero.
    TORCH_CHECK(!(grad_output.requires_grad() && at::GradMode::is_enabled()),
                "mmops::roi_pool: double backward is not implemented");
    const variable_list saved = ctx->get_saved_variables();
    std::vector<c10::SymInt> input_shape;
    for (int64_t d = 0; d < 4; ++d) {
      input_shape.push_back(ctx->saved_data["input_size_" + std::to_string(d)].toSymInt());
    }
    at::Tensor grad_input = ops::roi_pool_backward(grad_output, saved[0], saved[1], input_shape,
                                                   ctx->saved_data["spatial_scale"].toDouble());
    // Gradients for (input, rois, output_size, spatial_scale).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor roi_pool_autograd(const at::Tensor& input, const at::Tensor& rois,
                             c10::SymIntArrayRef output_size, double spatial_scale) {
  return RoIPoolFunction::apply(input, rois, output_size, spatial_scale);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("roi_pool", &mmops::roi_pool_autograd);
}
