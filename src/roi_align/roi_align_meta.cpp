// Meta (shape and dtype only) kernels of roi_align and multi_level_roi_align,
// for fake tensors, torch.compile and torch.export. Sizes stay symbolic.

#include "roi_align/roi_align_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

// (output [K, C, out_h, out_w], argmax: the output's shape in max mode, else [0]),
// with C, dtype and device of the (first) feature map.
std::tuple<at::Tensor, at::Tensor> forward_outputs(const at::Tensor& first, const at::Tensor& rois,
                                                   c10::SymIntArrayRef output_size, PoolMode pool_mode) {
  const std::vector<c10::SymInt> shape{rois.sym_size(0), first.sym_size(1), output_size[0], output_size[1]};
  at::Tensor output = at::empty_symint(shape, first.options());
  at::Tensor argmax = pool_mode == PoolMode::Max ? at::empty_symint(shape, first.options().dtype(at::kInt))
                                                 : at::empty_symint({0}, first.options().dtype(at::kInt));
  return {output, argmax};
}

std::tuple<at::Tensor, at::Tensor> roi_align_forward_meta(const at::Tensor& input, const at::Tensor& rois,
                                                          c10::SymIntArrayRef output_size, double spatial_scale,
                                                          int64_t sampling_ratio, c10::string_view pool_mode,
                                                          bool aligned) {
  const RoIAlignParams p = detail::check_roi_align_forward(detail::kRoIAlign, input, rois, output_size, spatial_scale,
                                                           sampling_ratio, pool_mode, aligned);
  return forward_outputs(input, rois, output_size, p.pool_mode);
}

at::Tensor roi_align_meta(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                          double spatial_scale, int64_t sampling_ratio, c10::string_view pool_mode, bool aligned) {
  return std::get<0>(
      roi_align_forward_meta(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned));
}

at::Tensor roi_align_backward_meta(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                                   c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio,
                                   c10::string_view pool_mode, bool aligned) {
  detail::check_roi_align_backward(detail::kRoIAlign, grad_output, rois, argmax, input_shape, spatial_scale,
                                   sampling_ratio, pool_mode, aligned);
  return at::empty_symint(input_shape, grad_output.options());
}

std::tuple<at::Tensor, at::Tensor> multi_level_forward_meta(at::TensorList features, const at::Tensor& rois,
                                                            c10::SymIntArrayRef output_size,
                                                            c10::ArrayRef<double> spatial_scales,
                                                            int64_t sampling_ratio, c10::string_view pool_mode,
                                                            bool aligned, int64_t finest_scale) {
  const RoIAlignParams p = detail::check_forward(detail::kMultiLevel, features, /*single=*/false, rois, output_size,
                                                 spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
  return forward_outputs(features.front(), rois, output_size, p.pool_mode);
}

at::Tensor multi_level_meta(at::TensorList features, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                            c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio, c10::string_view pool_mode,
                            bool aligned, int64_t finest_scale) {
  return std::get<0>(multi_level_forward_meta(features, rois, output_size, spatial_scales, sampling_ratio, pool_mode,
                                              aligned, finest_scale));
}

std::vector<at::Tensor> multi_level_backward_meta(const at::Tensor& grad_output, const at::Tensor& rois,
                                                  const at::Tensor& argmax, c10::SymIntArrayRef feature_sizes,
                                                  c10::ArrayRef<double> spatial_scales, int64_t sampling_ratio,
                                                  c10::string_view pool_mode, bool aligned, int64_t finest_scale) {
  detail::check_multi_level_roi_align_backward(detail::kMultiLevel, grad_output, rois, argmax, feature_sizes,
                                               spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale);
  std::vector<at::Tensor> grads;
  for (const auto& shape : detail::feature_shapes<c10::SymInt>(feature_sizes)) {
    grads.push_back(at::empty_symint(shape, grad_output.options()));
  }
  return grads;
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("roi_align", &mmops::roi_align_meta);
  m.impl("_roi_align_forward", &mmops::roi_align_forward_meta);
  m.impl("_roi_align_backward", &mmops::roi_align_backward_meta);
  m.impl("multi_level_roi_align", &mmops::multi_level_meta);
  m.impl("_multi_level_roi_align_forward", &mmops::multi_level_forward_meta);
  m.impl("_multi_level_roi_align_backward", &mmops::multi_level_backward_meta);
}
