// Meta (shape and dtype only) kernels of border_align, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "border_align/border_align_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

// [N, C, H * W, 4] of input [N, 4C, H, W]
std::vector<c10::SymInt> pooled_shape(const at::Tensor& input, const at::Tensor& boxes) {
  return {input.sym_size(0), input.sym_size(1) / 4, boxes.sym_size(1), c10::SymInt(4)};
}

at::Tensor border_align_meta(const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size) {
  detail::check_border_align_forward(input, boxes, pool_size);
  return at::empty_symint(pooled_shape(input, boxes), input.options());
}

std::tuple<at::Tensor, at::Tensor> forward_meta(const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size) {
  detail::check_border_align_forward(input, boxes, pool_size);
  const std::vector<c10::SymInt> shape = pooled_shape(input, boxes);
  return {at::empty_symint(shape, input.options()), at::empty_symint(shape, input.options().dtype(at::kInt))};
}

at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& boxes, const at::Tensor& argmax_idx,
                         int64_t pool_size, c10::SymIntArrayRef input_shape) {
  detail::check_border_align_backward(grad_output, boxes, argmax_idx, pool_size, input_shape);
  return at::empty_symint(input_shape, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("border_align", &mmops::border_align_meta);
  m.impl("_border_align_forward", &mmops::forward_meta);
  m.impl("_border_align_backward", &mmops::backward_meta);
}
