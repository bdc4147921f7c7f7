// Autograd of roi_align, in C++ so that backward works from C++ programs and
// from TorchScript loaded without Python.

#include "roi_align/roi_align_ops.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <string>

namespace mmops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class RoIAlignFunction : public torch::autograd::Function<RoIAlignFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale,
                            int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [output, argmax] = ops::roi_align_forward(input, rois, output_size, spatial_scale,
                                                   sampling_ratio, pool_mode, aligned);
    ctx->save_for_backward({rois, argmax});
    for (int64_t d = 0; d < 4; ++d) {
      ctx->saved_data["input_size_" + std::to_string(d)] = input.sym_size(d);
    }
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["pool_mode"] = std::string(pool_mode);
    ctx->saved_data["aligned"] = aligned;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    // The backward is linear in grad_output; differentiating it again is not
    // implemented, so refuse instead of returning a silently wrong zero.
    TORCH_CHECK(!(grad_output.requires_grad() && at::GradMode::is_enabled()),
                "mmops::roi_align: double backward is not implemented");
    const variable_list saved = ctx->get_saved_variables();
    std::vector<c10::SymInt> input_shape;
    for (int64_t d = 0; d < 4; ++d) {
      input_shape.push_back(ctx->saved_data["input_size_" + std::to_string(d)].toSymInt());
    }
    at::Tensor grad_input = ops::roi_align_backward(
        grad_output, saved[0], saved[1], input_shape, ctx->saved_data["spatial_scale"].toDouble(),
        ctx->saved_data["sampling_ratio"].toInt(), ctx->saved_data["pool_mode"].toStringRef(),
        ctx->saved_data["aligned"].toBool());
    // Gradients for (input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor roi_align_autograd(const at::Tensor& input, const at::Tensor& rois,
                              c10::SymIntArrayRef output_size, double spatial_scale,
                              int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  return RoIAlignFunction::apply(input, rois, output_size, spatial_scale, sampling_ratio,
                                 pool_mode, aligned);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("roi_align", &mmops::roi_align_autograd);
}
