// Meta (shape and dtype only) kernels of active_rotated_filter, for fake
// tensors, torch.compile and torch.export. Sizes stay symbolic.

#include "active_rotated_filter/active_rotated_filter_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

at::Tensor forward_meta(const at::Tensor& input, const at::Tensor& indices) {
  detail::check_active_rotated_filter_forward(input, indices);
  const std::vector<c10::SymInt> shape{input.sym_size(0) * indices.sym_size(3), input.sym_size(1) * input.sym_size(2),
                                       input.sym_size(3), input.sym_size(4)};
  return at::empty_symint(shape, input.options());
}

at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymIntArrayRef input_size) {
  detail::check_active_rotated_filter_backward(grad_output, indices, input_size);
  return at::empty_symint(input_size, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("active_rotated_filter", &mmops::forward_meta);
  m.impl("_active_rotated_filter_backward", &mmops::backward_meta);
}
