// Meta (shape and dtype only) kernels of roi_align_rotated, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "roi_align_rotated/roi_align_rotated_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor forward_meta(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                        double spatial_scale, int64_t sampling_ratio, bool aligned, bool clockwise) {
  detail::check_roi_align_rotated_forward(input, rois, output_size, spatial_scale, sampling_ratio, aligned, clockwise);
  return at::empty_symint({rois.sym_size(0), input.sym_size(1), output_size[0], output_size[1]}, input.options());
}

at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& rois, c10::SymIntArrayRef input_shape,
                         double spatial_scale, int64_t sampling_ratio, bool aligned, bool clockwise) {
  detail::check_roi_align_rotated_backward(grad_output, rois, input_shape, spatial_scale, sampling_ratio, aligned,
                                           clockwise);
  return at::empty_symint(input_shape, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("roi_align_rotated", &mmops::forward_meta);
  m.impl("_roi_align_rotated_backward", &mmops::backward_meta);
}
