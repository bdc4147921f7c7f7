// Meta (shape and dtype only) kernels of ps_roi_align and ps_roi_pool, for fake
// tensors, torch.compile and torch.export. Sizes stay symbolic.

#include "ps_roi/ps_roi_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

at::Tensor ps_forward_meta(const char* op, const at::Tensor& input, const at::Tensor& rois,
                           c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio) {
  detail::check_ps_roi_forward(op, input, rois, output_size, spatial_scale, sampling_ratio);
  const std::vector<c10::SymInt> shape{rois.sym_size(0), detail::ps_roi_channels_out(input, output_size),
                                       output_size[0], output_size[1]};
  return at::empty_symint(shape, input.options());
}

at::Tensor ps_roi_align_meta(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                             double spatial_scale, int64_t sampling_ratio) {
  return ps_forward_meta(kPSRoIAlignOp, input, rois, output_size, spatial_scale, sampling_ratio);
}

at::Tensor ps_roi_pool_meta(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                            double spatial_scale) {
  return ps_forward_meta(kPSRoIPoolOp, input, rois, output_size, spatial_scale, 0);
}

at::Tensor ps_roi_align_backward_meta(const at::Tensor& grad_output, const at::Tensor& rois,
                                      c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio) {
  detail::check_ps_roi_backward(kPSRoIAlignOp, grad_output, rois, input_shape, spatial_scale, sampling_ratio);
  return at::empty_symint(input_shape, grad_output.options());
}

at::Tensor ps_roi_pool_backward_meta(const at::Tensor& grad_output, const at::Tensor& rois,
                                     c10::SymIntArrayRef input_shape, double spatial_scale) {
  detail::check_ps_roi_backward(kPSRoIPoolOp, grad_output, rois, input_shape, spatial_scale, 0);
  return at::empty_symint(input_shape, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("ps_roi_align", &mmops::ps_roi_align_meta);
  m.impl("_ps_roi_align_backward", &mmops::ps_roi_align_backward_meta);
  m.impl("ps_roi_pool", &mmops::ps_roi_pool_meta);
  m.impl("_ps_roi_pool_backward", &mmops::ps_roi_pool_backward_meta);
}
