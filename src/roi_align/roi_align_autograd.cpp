// Autograd of roi_align and multi_level_roi_align, in C++ so that backward
// works from C++ programs and from TorchScript loaded without Python.

#include "common/autograd_utils.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "roi_align/roi_align_ops.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

// sampling_ratio, pool_mode (parsed once: the forward has validated it) and
// aligned, which both ops' backward schemas take.
void save_pooling(AutogradContext* ctx, const char* op, int64_t sampling_ratio, c10::string_view pool_mode,
                  bool aligned) {
  ctx->saved_data["sampling_ratio"] = sampling_ratio;
  detail::save_enum(ctx, "pool_mode", detail::parse_choice(op, "pool_mode", pool_mode, detail::kPoolModes));
  ctx->saved_data["aligned"] = aligned;
}

const char* saved_pool_mode(AutogradContext* ctx) {
  return detail::choice_name(detail::saved_enum<PoolMode>(ctx, "pool_mode"), detail::kPoolModes);
}

class RoIAlignFunction : public torch::autograd::Function<RoIAlignFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio,
                            c10::string_view pool_mode, bool aligned) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto forward_op = detail::op_handle<RoIAlignForwardFn>("mmops::_roi_align_forward");
    auto [output, argmax] =
        forward_op.call(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
    ctx->save_for_backward({rois, argmax});
    detail::save_sizes(ctx, "input_shape", input.sym_sizes());
    ctx->saved_data["spatial_scale"] = spatial_scale;
    save_pooling(ctx, "mmops::roi_align: ", sampling_ratio, pool_mode, aligned);
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::roi_align", grad_output);
    static const auto backward_op = detail::op_handle<RoIAlignBackwardFn>("mmops::_roi_align_backward");
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad_input =
        backward_op.call(grad_output, saved[0], saved[1], detail::saved_sizes(ctx, "input_shape"),
                         ctx->saved_data["spatial_scale"].toDouble(), ctx->saved_data["sampling_ratio"].toInt(),
                         saved_pool_mode(ctx), ctx->saved_data["aligned"].toBool());
    // Gradients for (input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned).
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class MultiLevelRoIAlignFunction : public torch::autograd::Function<MultiLevelRoIAlignFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, at::TensorList features, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, c10::ArrayRef<double> spatial_scales,
                            int64_t sampling_ratio, c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto forward_op =
        detail::op_handle<MultiLevelRoIAlignForwardFn>("mmops::_multi_level_roi_align_forward");
    auto [output, argmax] =
        forward_op.call(features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
    ctx->save_for_backward({rois, argmax});
    // [N, C, H_0, W_0, H_1, W_1, ...], symbolic under torch.compile.
    std::vector<c10::SymInt> sizes{features[0].sym_size(0), features[0].sym_size(1)};
    for (const at::Tensor& f : features) {
      sizes.push_back(f.sym_size(2));
      sizes.push_back(f.sym_size(3));
    }
    detail::save_sizes(ctx, "feature_sizes", sizes);
    ctx->saved_data["spatial_scales"] = spatial_scales.vec();
    save_pooling(ctx, "mmops::multi_level_roi_align: ", sampling_ratio, pool_mode, aligned);
    ctx->saved_data["finest_scale"] = finest_scale;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    detail::refuse_double_backward("mmops::multi_level_roi_align", grad_output);
    static const auto backward_op =
        detail::op_handle<MultiLevelRoIAlignBackwardFn>("mmops::_multi_level_roi_align_backward");
    const variable_list saved = ctx->get_saved_variables();
    const std::vector<double> scales = ctx->saved_data["spatial_scales"].toDoubleVector();
    variable_list grads =
        backward_op.call(grad_output, saved[0], saved[1], detail::saved_sizes(ctx, "feature_sizes"), scales,
                         ctx->saved_data["sampling_ratio"].toInt(), saved_pool_mode(ctx),
                         ctx->saved_data["aligned"].toBool(), ctx->saved_data["finest_scale"].toInt());
    // One gradient per feature map, then none for rois and the 6 non-tensor arguments.
    grads.resize(grads.size() + 7);
    return grads;
  }
};

at::Tensor roi_align_autograd(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                              double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  if (!detail::needs_grad({input})) {
    static const auto op = detail::op_handle<RoIAlignFn>("mmops::roi_align");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
  }
  return RoIAlignFunction::apply(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned);
}

at::Tensor multi_level_roi_align_autograd(at::TensorList features, const at::Tensor& rois,
                                          c10::SymIntArrayRef output_size, c10::ArrayRef<double> spatial_scales,
                                          int64_t sampling_ratio, c10::string_view pool_mode, bool aligned,
                                          int64_t finest_scale) {
  if (!detail::needs_grad(features)) {
    static const auto op = detail::op_handle<MultiLevelRoIAlignFn>("mmops::multi_level_roi_align");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
  }
  return MultiLevelRoIAlignFunction::apply(features, rois, output_size, spatial_scales, sampling_ratio, pool_mode,
                                           aligned, finest_scale);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("roi_align", &mmops::roi_align_autograd);
  m.impl("multi_level_roi_align", &mmops::multi_level_roi_align_autograd);
}
