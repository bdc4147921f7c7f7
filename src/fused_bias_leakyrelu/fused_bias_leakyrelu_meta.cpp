// Meta (shape and dtype only) kernels of fused_bias_leakyrelu, for fake
// tensors, torch.compile and torch.export. Sizes stay symbolic; outputs are
// contiguous (as the kernels').

#include "fused_bias_leakyrelu/fused_bias_leakyrelu_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor fused_bias_leakyrelu_meta(const at::Tensor& input, const at::Tensor& bias, double negative_slope,
                                     double scale) {
  detail::check_fused_bias_leakyrelu_forward(input, bias, negative_slope, scale);
  return at::empty_symint(input.sym_sizes(), input.options());
}

at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& output, double negative_slope, double scale) {
  detail::check_fused_bias_leakyrelu_backward(grad_output, output, negative_slope, scale);
  return at::empty_symint(grad_output.sym_sizes(), grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("fused_bias_leakyrelu", &mmops::fused_bias_leakyrelu_meta);
  m.impl("_fused_bias_leakyrelu_backward", &mmops::backward_meta);
}
