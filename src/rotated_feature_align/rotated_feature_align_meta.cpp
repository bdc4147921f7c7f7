// Meta (shape and dtype only) kernels of rotated_feature_align, for fake
// tensors, torch.compile and torch.export. Sizes stay symbolic.

#include "rotated_feature_align/rotated_feature_align_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

// The output takes the memory format of features, as the CPU and CUDA kernels.
at::Tensor forward_meta(const at::Tensor& features, const at::Tensor& best_rbboxes, double spatial_scale,
                        int64_t points) {
  detail::check_rotated_feature_align_forward(features, best_rbboxes, spatial_scale, points);
  return at::empty_symint(features.sym_sizes(), features.options(), features.suggest_memory_format());
}

at::Tensor backward_meta(const at::Tensor& grad_output, const at::Tensor& best_rbboxes, double spatial_scale,
                         int64_t points) {
  detail::check_rotated_feature_align_backward(grad_output, best_rbboxes, spatial_scale, points);
  return at::empty_symint(grad_output.sym_sizes(), grad_output.options(), grad_output.suggest_memory_format());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("rotated_feature_align", &mmops::forward_meta);
  m.impl("_rotated_feature_align_backward", &mmops::backward_meta);
}
