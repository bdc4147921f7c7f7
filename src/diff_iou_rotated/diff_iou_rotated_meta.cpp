// Meta (shape and dtype only) kernels of diff_iou_rotated_2d / _3d, for fake
// tensors, torch.compile and torch.export. Sizes stay symbolic.

#include "diff_iou_rotated/diff_iou_rotated_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

template <int64_t kColumns>
at::Tensor forward_meta(const at::Tensor& box1, const at::Tensor& box2) {
  detail::check_diff_iou_rotated(kColumns, box1, box2);
  return at::empty_symint({box1.sym_size(0), box1.sym_size(1)}, box1.options());
}

template <int64_t kColumns>
std::tuple<at::Tensor, at::Tensor> backward_meta(const at::Tensor& grad_output, const at::Tensor& box1,
                                                 const at::Tensor& box2) {
  detail::check_diff_iou_rotated_backward(kColumns, grad_output, box1, box2);
  return {at::empty_symint(box1.sym_sizes(), box1.options()), at::empty_symint(box2.sym_sizes(), box2.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("diff_iou_rotated_2d", &mmops::forward_meta<5>);
  m.impl("_diff_iou_rotated_2d_backward", &mmops::backward_meta<5>);
  m.impl("diff_iou_rotated_3d", &mmops::forward_meta<7>);
  m.impl("_diff_iou_rotated_3d_backward", &mmops::backward_meta<7>);
}
