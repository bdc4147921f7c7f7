// Meta (shape and dtype only) kernels of masked_conv2d, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic; the output size does
// not depend on the mask's values.

#include "masked_conv/masked_conv_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor masked_conv2d_meta(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, at::IntArrayRef padding, at::IntArrayRef stride) {
  const detail::MaskedConvChecked c = detail::check_masked_conv2d(input, mask, weight, bias, padding, stride);
  return at::empty_symint({input.sym_size(0), weight.sym_size(0), c.out_h, c.out_w}, input.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_meta(const at::Tensor& grad_output, const at::Tensor& input,
                                                             const at::Tensor& mask, const at::Tensor& weight,
                                                             at::IntArrayRef padding, at::IntArrayRef stride,
                                                             std::array<bool, 3> output_mask) {
  detail::check_masked_conv2d_backward(grad_output, input, mask, weight, padding, stride);
  const c10::SymInt none(0);
  return {
      output_mask[0] ? at::empty_symint(input.sym_sizes(), input.options()) : at::empty_symint({none}, input.options()),
      output_mask[1] ? at::empty_symint(weight.sym_sizes(), weight.options())
                     : at::empty_symint({none}, weight.options()),
      at::empty_symint({output_mask[2] ? weight.sym_size(0) : none}, weight.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("masked_conv2d", &mmops::masked_conv2d_meta);
  m.impl("_masked_conv2d_backward", &mmops::backward_meta);
}
