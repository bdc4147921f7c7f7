// Meta (shape and dtype only) kernels of bezier_align, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "bezier_align/bezier_align_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor bezier_align_meta(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                             double spatial_scale, int64_t sampling_ratio, bool aligned) {
  detail::check_bezier_align_forward(input, rois, output_size, spatial_scale, sampling_ratio, aligned);
  return at::empty_symint({rois.sym_size(0), input.sym_size(1), output_size[0], output_size[1]}, input.options());
}

at::Tensor bezier_align_backward_meta(const at::Tensor& grad_output, const at::Tensor& rois,
                                      c10::SymIntArrayRef input_shape, double spatial_scale, int64_t sampling_ratio,
                                      bool aligned) {
  detail::check_bezier_align_backward(grad_output, rois, input_shape, spatial_scale, sampling_ratio, aligned);
  return at::empty_symint(input_shape, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("bezier_align", &mmops::bezier_align_meta);
  m.impl("_bezier_align_backward", &mmops::bezier_align_backward_meta);
}
