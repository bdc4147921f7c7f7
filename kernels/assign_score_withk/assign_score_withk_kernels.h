#pragma once
// Device kernels of assign_score_withk. Callers (src/assign_score_withk)
// validate the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

struct AssignScoreWithKParams {
  int64_t batch;   // B
  int64_t points;  // N: rows of point_features / center_features
  int64_t centers; // npoint
  int64_t k;       // K neighbours per center (knn_idx[b, n, 0] is the center itself)
  int64_t weights; // M: matrices of the weight bank
  int64_t out_dim; // O
};

namespace kernels {

// scores [B, npoint, K, M], point_features / center_features [B, N, M, O],
// knn_idx [B, npoint, K] (int32 or int64) -> output [B, O, npoint, K]:
//   output[b, o, n, k] = sum_m scores[b, n, k, m] *
//       (point_features[b, knn[b, n, k], m, o] - center_features[b, knn[b, n, 0], m, o]),
// 0 where knn[b, n, k] or knn[b, n, 0] lies outside [0, N).
at::Tensor assign_score_withk_forward_cpu(const at::Tensor& scores, const at::Tensor& point_features,
                                          const at::Tensor& center_features, const at::Tensor& knn_idx,
                                          const AssignScoreWithKParams& params);

// -> (grad_scores, grad_point_features, grad_center_features).
std::tuple<at::Tensor, at::Tensor, at::Tensor> assign_score_withk_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& scores, const at::Tensor& point_features,
    const at::Tensor& center_features, const at::Tensor& knn_idx, const AssignScoreWithKParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor assign_score_withk_forward_cuda(const at::Tensor& scores, const at::Tensor& point_features,
                                           const at::Tensor& center_features, const at::Tensor& knn_idx,
                                           const AssignScoreWithKParams& params);

std::tuple<at::Tensor, at::Tensor, at::Tensor> assign_score_withk_backward_cuda(
    const at::Tensor& grad_output, const at::Tensor& scores, const at::Tensor& point_features,
    const at::Tensor& center_features, const at::Tensor& knn_idx, const AssignScoreWithKParams& params);
#endif

} // namespace kernels
} // namespace mmops
