// Meta (shape and dtype only) kernels of chamfer_distance, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "chamfer_distance/chamfer_distance_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> forward_meta(const at::Tensor& xyz1,
                                                                        const at::Tensor& xyz2) {
  detail::check_chamfer_distance_forward(xyz1, xyz2);
  const c10::SymInt& batch = xyz1.sym_size(0);
  const auto index = xyz1.options().dtype(at::kInt);
  return {at::empty_symint({batch, xyz1.sym_size(1)}, xyz1.options()),
          at::empty_symint({batch, xyz2.sym_size(1)}, xyz1.options()),
          at::empty_symint({batch, xyz1.sym_size(1)}, index), at::empty_symint({batch, xyz2.sym_size(1)}, index)};
}

std::tuple<at::Tensor, at::Tensor> backward_meta(const at::Tensor& xyz1, const at::Tensor& xyz2, const at::Tensor& idx1,
                                                 const at::Tensor& idx2, const at::Tensor& grad_dist1,
                                                 const at::Tensor& grad_dist2) {
  detail::check_chamfer_distance_backward(xyz1, xyz2, idx1, idx2, grad_dist1, grad_dist2);
  return {at::empty_symint(xyz1.sym_sizes(), xyz1.options()), at::empty_symint(xyz2.sym_sizes(), xyz2.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("chamfer_distance", &mmops::forward_meta);
  m.impl("_chamfer_distance_backward", &mmops::backward_meta);
}
