// Meta (shape and dtype only) kernels of corner_pool, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic; the results take the
// input's suggested memory format, as the device kernels' do.

#include "corner_pool/corner_pool_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor corner_pool_forward_meta(const at::Tensor& input, c10::string_view mode) {
  detail::check_corner_pool_forward(input, mode);
  return at::empty_symint(input.sym_sizes(), input.options(), input.suggest_memory_format());
}

at::Tensor corner_pool_backward_meta(const at::Tensor& grad_output, const at::Tensor& input, c10::string_view mode) {
  detail::check_corner_pool_backward(grad_output, input, mode);
  return at::empty_symint(input.sym_sizes(), input.options(), input.suggest_memory_format());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("corner_pool", &mmops::corner_pool_forward_meta);
  m.impl("_corner_pool_backward", &mmops::corner_pool_backward_meta);
}
