// Autograd of deform_roi_pool, in C++ so that backward works from C++ programs
// and from TorchScript loaded without Python.

#include "deform_roi_pool/deform_roi_pool_ops.h"

#include "common/autograd_utils.h"
#include "common/dispatch.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace mmops {
namespace {

class DeformRoIPoolFunction : public torch::autograd::Function<DeformRoIPoolFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            const std::optional<at::Tensor>& offset, c10::SymIntArrayRef output_size,
                            double spatial_scale, int64_t sampling_ratio, double gamma) {
    static const auto op = detail::op_handle<DeformRoIPoolFn>("mmops::deform_roi_pool");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor output = op.call(input, rois, offset, output_size, spatial_scale, sampling_ratio, gamma);
    // An undefined tensor stands for "no offset".
    ctx->save_for_backward({input, rois, offset.value_or(at::Tensor())});
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["gamma"] = gamma;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto backward_op = detail::op_handle<DeformRoIPoolBackwardFn>("mmops::_deform_roi_pool_backward");
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::deform_roi_pool", grad_output);
    const variable_list saved = ctx->get_saved_variables();
    const std::optional<at::Tensor> offset = saved[2].defined() ? std::optional<at::Tensor>(saved[2]) : std::nullopt;
    auto [grad_input, grad_offset] =
        backward_op.call(grad_output, saved[0], saved[1], offset, ctx->saved_data["spatial_scale"].toDouble(),
                         ctx->saved_data["sampling_ratio"].toInt(), ctx->saved_data["gamma"].toDouble());
    // Gradients for (input, rois, offset, output_size, spatial_scale, sampling_ratio, gamma).
    return {grad_input,   at::Tensor(), offset.has_value() ? grad_offset : at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

at::Tensor deform_roi_pool_autograd(const at::Tensor& input, const at::Tensor& rois,
                                    const std::optional<at::Tensor>& offset, c10::SymIntArrayRef output_size,
                                    double spatial_scale, int64_t sampling_ratio, double gamma) {
  return DeformRoIPoolFunction::apply(input, rois, offset, output_size, spatial_scale, sampling_ratio, gamma);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("deform_roi_pool", &mmops::deform_roi_pool_autograd);
}
