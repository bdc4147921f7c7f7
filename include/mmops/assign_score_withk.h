#pragma once
// Public C++ API of mmops::assign_score_withk (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

namespace mmops {

// PAConv's score assignment with mmcv's semantics:
//   scores [B, npoint, K, M], point_features / center_features [B, N, M, O] (one
//   floating dtype), knn_idx [B, npoint, K] int64 or int32 (knn_idx[b, n, 0] is
//   the center of neighbourhood n)
//   -> output [B, O, npoint, K]:
//   output[b, o, n, k] = sum_m scores[b, n, k, m] *
//       (point_features[b, knn_idx[b, n, k], m, o] - center_features[b, knn_idx[b, n, 0], m, o]).
// aggregate ("sum", "avg" or "max") is validated and, as in mmcv, has no effect.
// knn_idx values outside [0, N) raise on CPU (and on CUDA with the strict
// switch); unchecked CUDA gives such a pair 0 and no gradient. Differentiable
// w.r.t. scores, point_features and center_features.
at::Tensor assign_score_withk(const at::Tensor& scores, const at::Tensor& point_features,
                              const at::Tensor& center_features, const at::Tensor& knn_idx,
                              c10::string_view aggregate = "sum");

} // namespace mmops
