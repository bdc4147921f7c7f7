// Meta (shape, dtype and memory format only) kernels of deform_conv2d,
// modulated_deform_conv2d and their backward, for fake tensors, torch.compile
// and torch.export. Sizes stay symbolic. The layouts match the real kernels:
// output and grad_input in the input's suggested memory format, the other
// gradients contiguous, gradients not asked for empty [0].

#include "deform_conv/deform_conv_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

// The output (and grad_input) have the input's memory format, as the kernels return them.
at::Tensor like_input(c10::SymIntArrayRef shape, const at::Tensor& input) {
  return at::empty_symint(shape, input.options(), input.suggest_memory_format());
}

at::Tensor deform_conv2d_meta(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                              c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups,
                              int64_t deform_groups) {
  const detail::DeformConvChecked c =
      detail::check_deform_conv2d(input, offset, weight, bias, stride, padding, dilation, groups, deform_groups);
  return like_input(c.output_shape, input);
}

at::Tensor modulated_deform_conv2d_meta(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                                        const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                        c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                        c10::SymIntArrayRef dilation, int64_t groups, int64_t deform_groups) {
  const detail::DeformConvChecked c = detail::check_modulated_deform_conv2d(input, offset, mask, weight, bias, stride,
                                                                            padding, dilation, groups, deform_groups);
  return like_input(c.output_shape, input);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> deform_conv2d_backward_meta(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& offset,
    const std::optional<at::Tensor>& mask, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups, int64_t deform_groups,
    std::array<bool, 5> output_mask) {
  detail::check_deform_conv2d_backward(grad_output, input, offset, mask, weight, stride, padding, dilation, groups,
                                       deform_groups);
  const bool has_mask = mask.has_value() && mask->defined();
  const at::TensorOptions options = input.options();
  auto none = [&] { return at::empty_symint({0}, options); };
  return {
      output_mask[0] ? like_input(input.sym_sizes(), input) : none(),
      output_mask[1] ? at::empty_symint(offset.sym_sizes(), options) : none(),
      output_mask[2] && has_mask ? at::empty_symint(mask->sym_sizes(), options) : none(),
      output_mask[3] ? at::empty_symint(weight.sym_sizes(), options) : none(),
      output_mask[4] ? at::empty_symint({weight.sym_size(0)}, options) : none(),
  };
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("deform_conv2d", &mmops::deform_conv2d_meta);
  m.impl("modulated_deform_conv2d", &mmops::modulated_deform_conv2d_meta);
  m.impl("_deform_conv2d_backward", &mmops::deform_conv2d_backward_meta);
}
