// Meta (shape and dtype only) kernels of tin_shift, for fake tensors,
// torch.compile and torch.export: the result has the (contiguous) shape of
// its source. Sizes stay symbolic.

#include "tin_shift/tin_shift_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor tin_shift_meta(const at::Tensor& input, const at::Tensor& shift) {
  detail::check_tin_shift_forward(input, shift);
  return at::empty_symint(input.sym_sizes(), input.options());
}

at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& shift) {
  detail::check_tin_shift_backward(grad_output, shift);
  return at::empty_symint(grad_output.sym_sizes(), grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("tin_shift", &mmops::tin_shift_meta);
  m.impl("_tin_shift_backward", &mmops::backward_meta);
}
