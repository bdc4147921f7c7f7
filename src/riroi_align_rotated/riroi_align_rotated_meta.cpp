// Meta (shape and dtype only) kernels of riroi_align_rotated, for fake
// tensors, torch.compile and torch.export. Sizes stay symbolic.

#include "riroi_align_rotated/riroi_align_rotated_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor forward_meta(const at::Tensor& features, const at::Tensor& rois, c10::SymIntArrayRef out_size,
                        double spatial_scale, int64_t num_samples, int64_t num_orientations, bool clockwise) {
  detail::check_riroi_align_rotated_forward(features, rois, out_size, spatial_scale, num_samples, num_orientations,
                                            clockwise);
  return at::empty_symint({rois.sym_size(0), features.sym_size(1), out_size[0], out_size[1]}, features.options());
}

at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& rois, c10::SymIntArrayRef input_shape,
                         double spatial_scale, int64_t num_samples, int64_t num_orientations, bool clockwise) {
  detail::check_riroi_align_rotated_backward(grad_output, rois, input_shape, spatial_scale, num_samples,
                                             num_orientations, clockwise);
  return at::empty_symint(input_shape, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("riroi_align_rotated", &mmops::forward_meta);
  m.impl("_riroi_align_rotated_backward", &mmops::backward_meta);
}
