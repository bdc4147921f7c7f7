// Meta (shape and dtype only) kernels of prroi_pool, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "prroi_pool/prroi_pool_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor prroi_pool_meta(const at::Tensor& input, const at::Tensor& rois, c10::SymIntArrayRef output_size,
                           double spatial_scale) {
  detail::check_prroi_pool_forward(input, rois, output_size, spatial_scale);
  return at::empty_symint({rois.sym_size(0), input.sym_size(1), output_size[0], output_size[1]}, input.options());
}

at::Tensor input_backward_meta(const at::Tensor& grad_output, const at::Tensor& rois, c10::SymIntArrayRef input_shape,
                               double spatial_scale) {
  detail::check_prroi_pool_input_backward(grad_output, rois, input_shape, spatial_scale);
  return at::empty_symint(input_shape, grad_output.options());
}

at::Tensor rois_backward_meta(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& rois,
                              double spatial_scale) {
  detail::check_prroi_pool_rois_backward(grad_output, input, rois, spatial_scale);
  return at::empty_symint(rois.sym_sizes(), rois.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("prroi_pool", &mmops::prroi_pool_meta);
  m.impl("_prroi_pool_input_backward", &mmops::input_backward_meta);
  m.impl("_prroi_pool_rois_backward", &mmops::rois_backward_meta);
}
