// prepare_backward (assign_score_withk_backward.h).

#include "assign_score_withk/assign_score_withk_backward.h"

#include <ATen/ops/empty_like.h>
#include <ATen/ops/where.h>

namespace mmops {
namespace kernels {

AssignScoreWithKBackward prepare_backward(const at::Tensor& grad_output, const at::Tensor& scores,
                                          const at::Tensor& point_features, const at::Tensor& center_features,
                                          const at::Tensor& knn_idx, const AssignScoreWithKParams& p) {
  AssignScoreWithKBackward b;
  b.scores = scores.contiguous();
  b.points = point_features.contiguous();
  b.centers = center_features.contiguous();
  b.knn = knn_idx.contiguous();
  b.grad_t = grad_output.permute({0, 2, 3, 1}).contiguous();
  b.grad_scores = at::empty_like(b.scores);
  b.grad_points = at::empty_like(b.points);
  b.grad_centers = at::empty_like(b.centers);
  // a pair whose center is out of range belongs to no point segment (CUDA's guard)
  const at::Tensor center = b.knn.narrow(2, 0, p.k > 0 ? 1 : 0); // [B, npoint, 1]
  const at::Tensor center_ok = center.ge(0).logical_and_(center.lt(p.points));
  b.by_point = group_by_index(at::where(center_ok, b.knn, -1).reshape({p.batch, p.centers * p.k}), p.points);
  b.by_center = group_by_index(center.reshape({p.batch, p.k > 0 ? p.centers : 0}), p.points);
  return b;
}

} // namespace kernels
} // namespace mmops
