#pragma once
// The operands of assign_score_withk's backward, prepared the same way for the
// CPU and CUDA kernels (ATen ops on the inputs' device, no host sync).

#include "assign_score_withk/assign_score_withk_kernels.h"
#include "common/index_segments.h"

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

struct AssignScoreWithKBackward {
  // the inputs, contiguous; grad_output transposed to [B, npoint, K, O]
  at::Tensor scores, points, centers, knn, grad_t;
  // the gradients (uninitialised), in the inputs' shapes
  at::Tensor grad_scores, grad_points, grad_centers;
  // the valid pairs b * Q + q by neighbour row b * N + knn[b, q]
  IndexSegments by_point;
  // the centers b * npoint + n by center row b * N + knn[b, n, 0]
  IndexSegments by_center;
};

AssignScoreWithKBackward prepare_backward(const at::Tensor& grad_output, const at::Tensor& scores,
                                          const at::Tensor& point_features, const at::Tensor& center_features,
                                          const at::Tensor& knn_idx, const AssignScoreWithKParams& params);

} // namespace kernels
} // namespace mmops
