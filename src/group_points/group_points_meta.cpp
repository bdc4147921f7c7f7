// Meta (shape and dtype only) kernels of gather_points, group_points and
// stack_group_points. Sizes stay symbolic.

#include "group_points/group_points_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor gather_meta(const at::Tensor& features, const at::Tensor& indices) {
  detail::check_gather_points_forward(features, indices);
  return at::empty_symint({features.sym_size(0), features.sym_size(1), indices.sym_size(1)}, features.options());
}

at::Tensor gather_backward_meta(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt n) {
  detail::check_gather_points_backward(grad_output, indices, n);
  return at::empty_symint({grad_output.sym_size(0), grad_output.sym_size(1), n}, grad_output.options());
}

at::Tensor group_meta(const at::Tensor& features, const at::Tensor& indices) {
  detail::check_group_points_forward(features, indices);
  return at::empty_symint({features.sym_size(0), features.sym_size(1), indices.sym_size(1), indices.sym_size(2)},
                          features.options());
}

at::Tensor group_backward_meta(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt n) {
  detail::check_group_points_backward(grad_output, indices, n);
  return at::empty_symint({grad_output.sym_size(0), grad_output.sym_size(1), n}, grad_output.options());
}

at::Tensor stack_meta(const at::Tensor& features, const at::Tensor& features_batch_cnt, const at::Tensor& indices,
                      const at::Tensor& indices_batch_cnt) {
  detail::check_stack_group_points_forward(features, features_batch_cnt, indices, indices_batch_cnt);
  return at::empty_symint({indices.sym_size(0), features.sym_size(1), indices.sym_size(1)}, features.options());
}

at::Tensor stack_backward_meta(const at::Tensor& grad_output, const at::Tensor& features_batch_cnt,
                               const at::Tensor& indices, const at::Tensor& indices_batch_cnt, c10::SymInt n) {
  detail::check_stack_group_points_backward(grad_output, features_batch_cnt, indices, indices_batch_cnt, n);
  return at::empty_symint({n, grad_output.sym_size(1)}, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("gather_points", &mmops::gather_meta);
  m.impl("_gather_points_backward", &mmops::gather_backward_meta);
  m.impl("group_points", &mmops::group_meta);
  m.impl("_group_points_backward", &mmops::group_backward_meta);
  m.impl("stack_group_points", &mmops::stack_meta);
  m.impl("_stack_group_points_backward", &mmops::stack_backward_meta);
}
