// Meta (shape and dtype only) kernels of assign_score_withk, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "assign_score_withk/assign_score_withk_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

at::Tensor forward_meta(const at::Tensor& scores, const at::Tensor& point_features, const at::Tensor& center_features,
                        const at::Tensor& knn_idx, c10::string_view aggregate) {
  detail::check_assign_score_withk_forward(scores, point_features, center_features, knn_idx, aggregate);
  const std::vector<c10::SymInt> shape{scores.sym_size(0), point_features.sym_size(3), scores.sym_size(1),
                                       scores.sym_size(2)};
  return at::empty_symint(shape, scores.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_meta(const at::Tensor& grad_output, const at::Tensor& scores,
                                                             const at::Tensor& point_features,
                                                             const at::Tensor& center_features,
                                                             const at::Tensor& knn_idx) {
  detail::check_assign_score_withk_backward(grad_output, scores, point_features, center_features, knn_idx);
  return {at::empty_symint(scores.sym_sizes(), scores.options()),
          at::empty_symint(point_features.sym_sizes(), scores.options()),
          at::empty_symint(center_features.sym_sizes(), scores.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("assign_score_withk", &mmops::forward_meta);
  m.impl("_assign_score_withk_backward", &mmops::backward_meta);
}
