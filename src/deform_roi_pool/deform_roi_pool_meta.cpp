// Meta (shape and dtype only) kernels of deform_roi_pool, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "deform_roi_pool/deform_roi_pool_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

at::Tensor forward_meta(const at::Tensor& input, const at::Tensor& rois, const std::optional<at::Tensor>& offset,
                        c10::SymIntArrayRef output_size, double spatial_scale, int64_t sampling_ratio, double gamma) {
  detail::check_deform_roi_pool_forward(input, rois, offset, output_size, spatial_scale, sampling_ratio, gamma);
  const std::vector<c10::SymInt> shape{rois.sym_size(0), input.sym_size(1), output_size[0], output_size[1]};
  return at::empty_symint(shape, input.options());
}

std::tuple<at::Tensor, at::Tensor> backward_meta(const at::Tensor& grad_output, const at::Tensor& input,
                                                 const at::Tensor& rois, const std::optional<at::Tensor>& offset,
                                                 double spatial_scale, int64_t sampling_ratio, double gamma) {
  detail::check_deform_roi_pool_backward(grad_output, input, rois, offset, spatial_scale, sampling_ratio, gamma);
  at::Tensor grad_offset = offset.has_value() ? at::empty_symint(offset->sym_sizes(), input.options())
                                              : at::empty_symint({c10::SymInt(0)}, input.options());
  return {at::empty_symint(input.sym_sizes(), input.options()), grad_offset};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("deform_roi_pool", &mmops::forward_meta);
  m.impl("_deform_roi_pool_backward", &mmops::backward_meta);
}
