// Meta (shape and dtype only) kernels of ms_deform_attn, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "ms_deform_attn/ms_deform_attn_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor ms_deform_attn_meta(const at::Tensor& value, const at::Tensor& spatial_shapes,
                               const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                               const at::Tensor& attention_weights) {
  detail::check_ms_deform_attn_forward(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
  return at::empty_symint(
      {sampling_locations.sym_size(0), sampling_locations.sym_size(1), value.sym_size(2) * value.sym_size(3)},
      value.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward_meta(
    const at::Tensor& grad_output, const at::Tensor& value, const at::Tensor& spatial_shapes,
    const at::Tensor& level_start_index, const at::Tensor& sampling_locations, const at::Tensor& attention_weights) {
  detail::check_ms_deform_attn_backward(grad_output, value, spatial_shapes, level_start_index, sampling_locations,
                                        attention_weights);
  return {at::empty_symint(value.sym_sizes(), value.options()),
          at::empty_symint(sampling_locations.sym_sizes(), sampling_locations.options()),
          at::empty_symint(attention_weights.sym_sizes(), attention_weights.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("ms_deform_attn", &mmops::ms_deform_attn_meta);
  m.impl("_ms_deform_attn_backward", &mmops::ms_deform_attn_backward_meta);
}
