// Autograd of multi_level_roi_align in C++: one gradient per feature map.

#include "roi_align/roi_align_ops.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include <string>

namespace mmops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class MultiLevelRoIAlignFunction : public torch::autograd::Function<MultiLevelRoIAlignFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, at::TensorList features, const at::Tensor& rois,
                            c10::SymIntArrayRef output_size, c10::ArrayRef<double> spatial_scales,
                            int64_t sampling_ratio, c10::string_view pool_mode, bool aligned,
                            int64_t finest_scale) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [output, argmax] = ops::multi_level_roi_align_forward(
        features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
    ctx->save_for_backward({rois, argmax});
    // [N, C, H_0, W_0, H_1, W_1, ...], symbolic under torch.compile.
    std::vector<c10::SymInt> sizes{features[0].sym_size(0), features[0].sym_size(1)};
    for (const at::Tensor& f : features) {
      sizes.push_back(f.sym_size(2));
      sizes.push_back(f.sym_size(3));
    }
    ctx->saved_data["num_sizes"] = static_cast<int64_t>(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      ctx->saved_data["size_" + std::to_string(i)] = sizes[i];
    }
    ctx->saved_data["spatial_scales"] = spatial_scales.vec();
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["pool_mode"] = std::string(pool_mode);
    ctx->saved_data["aligned"] = aligned;
    ctx->saved_data["finest_scale"] = finest_scale;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    TORCH_CHECK(!(grad_output.requires_grad() && at::GradMode::is_enabled()),
                "mmops::multi_level_roi_align: double backward is not implemented");
    const variable_list saved = ctx->get_saved_variables();
    std::vector<c10::SymInt> sizes;
    for (int64_t i = 0; i < ctx->saved_data["num_sizes"].toInt(); ++i) {
      sizes.push_back(ctx->saved_data["size_" + std::to_string(i)].toSymInt());
    }
    const std::vector<double> scales = ctx->saved_data["spatial_scales"].toDoubleVector();
    variable_list grads = ops::multi_level_roi_align_backward(
        grad_output, saved[0], saved[1], sizes, scales, ctx->saved_data["sampling_ratio"].toInt(),
        ctx->saved_data["pool_mode"].toStringRef(), ctx->saved_data["aligned"].toBool(),
        ctx->saved_data["finest_scale"].toInt());
    // One gradient per feature map, then none for rois and the 6 non-tensor arguments.
    grads.resize(grads.size() + 7);
    return grads;
  }
};

at::Tensor multi_level_roi_align_autograd(at::TensorList features, const at::Tensor& rois,
                                          c10::SymIntArrayRef output_size,
                                          c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
                                          c10::string_view pool_mode, bool aligned,
                                          int64_t finest_scale) {
  return MultiLevelRoIAlignFunction::apply(features, rois, output_size, spatial_scales,
                                           sampling_ratio, pool_mode, aligned, finest_scale);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("multi_level_roi_align", &mmops::multi_level_roi_align_autograd);
}
