// mmops::assign_score_withk: schemas, device entries (CPU/CUDA registration)
// and the public C++ API. Validation is in assign_score_withk_checks.cpp,
// kernels in kernels/assign_score_withk, the meta functions in
// assign_score_withk_meta.cpp and autograd in assign_score_withk_autograd.cpp.

#include "assign_score_withk/assign_score_withk_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"
#include "common/index_policy.h"

#include <mmops/assign_score_withk.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "assign_score_withk(Tensor scores, Tensor point_features, Tensor center_features, Tensor knn_idx, "
            "str aggregate=\"sum\") -> Tensor");
  define_op(m,
            "_assign_score_withk_backward(Tensor grad_output, Tensor scores, Tensor point_features, "
            "Tensor center_features, Tensor knn_idx) -> (Tensor, Tensor, Tensor)");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), knn_idx's values when
// the index policy says so (CPU always), then the kernel.
void apply_index_policy(const at::Tensor& knn_idx, const AssignScoreWithKParams& p) {
  if (detail::should_validate_indices(knn_idx)) {
    detail::check_assign_score_withk_indices(knn_idx, p.points);
  }
}

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& scores, const at::Tensor& point_features, const at::Tensor& center_features,
                         const at::Tensor& knn_idx, c10::string_view aggregate) {
  const AssignScoreWithKParams p =
      detail::check_assign_score_withk_forward(scores, point_features, center_features, knn_idx, aggregate);
  apply_index_policy(knn_idx, p);
  return Kernel(scores, point_features, center_features, knn_idx, p);
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_entry(const at::Tensor& grad_output, const at::Tensor& scores,
                                                              const at::Tensor& point_features,
                                                              const at::Tensor& center_features,
                                                              const at::Tensor& knn_idx) {
  const AssignScoreWithKParams p =
      detail::check_assign_score_withk_backward(grad_output, scores, point_features, center_features, knn_idx);
  apply_index_policy(knn_idx, p);
  return Kernel(grad_output, scores, point_features, center_features, knn_idx, p);
}

} // namespace

at::Tensor assign_score_withk(const at::Tensor& scores, const at::Tensor& point_features,
                              const at::Tensor& center_features, const at::Tensor& knn_idx,
                              c10::string_view aggregate) {
  static const auto op = detail::op_handle<AssignScoreWithKFn>("mmops::assign_score_withk");
  return op.call(scores, point_features, center_features, knn_idx, aggregate);
}

} // namespace mmops

#define MMOPS_ASSIGN_SCORE_WITHK_ENTRIES(m, device)                                           \
  m.impl("assign_score_withk", &forward_entry<kernels::assign_score_withk_forward_##device>); \
  m.impl("_assign_score_withk_backward", &backward_entry<kernels::assign_score_withk_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_ASSIGN_SCORE_WITHK_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "assign_score_withk")
