#pragma once
// Device kernels of the neighbour queries (ball_query, stack_ball_query, knn,
// three_nn). Callers (src/neighbors) validate the arguments first; these
// functions only compute. Points are [.., 3] (x, y, z) in any strides; float16
// and bfloat16 compute in float.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

// ball_query / stack_ball_query: a point k is in the ball of a centre when its
// squared distance d2 satisfies d2 == 0 || (min_radius^2 <= d2 < max_radius^2)
// (dense) or d2 < max_radius^2 (stacked); radii squared in the compute type.
struct BallQueryParams {
  double min_radius = 0;
  double max_radius = 0;
  int64_t sample_num = 0;
};

namespace kernels {

// xyz [B, N, 3], center_xyz [B, npoint, 3] -> int32 [B, npoint, sample_num]:
// the first sample_num points of the ball in index order; the remaining slots
// repeat the first one found; 0 everywhere when the ball is empty.
at::Tensor ball_query_cpu(const at::Tensor& xyz, const at::Tensor& center_xyz, const BallQueryParams& p);

// xyz [N1 + N2 + ..., 3], center_xyz [M1 + M2 + ..., 3], the counts [B] as int64
// -> int32 [M, sample_num] of indices local to the centre's batch; an empty
// ball gives -1 in slot 0 and 0 in the others. A centre outside the counted
// total (CUDA, unchecked counts) has an empty ball.
at::Tensor stack_ball_query_cpu(const at::Tensor& xyz, const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                                const at::Tensor& center_xyz_batch_cnt, const BallQueryParams& p);

// xyz [B, N, 3], center_xyz [B, npoint, 3] -> int32 [B, k, npoint]: the k
// nearest points of every centre, nearest first (ties: lower index first; NaN
// distances after all others); slots beyond N hold 0.
at::Tensor knn_cpu(const at::Tensor& xyz, const at::Tensor& center_xyz, int64_t k);

// target [B, N, 3], source [B, M, 3] -> (dist [B, N, 3] in target's dtype,
// idx int32 [B, N, 3]): the 3 nearest sources of every target (as knn) and
// their Euclidean distances; slots beyond M hold index 0 and distance +inf.
std::tuple<at::Tensor, at::Tensor> three_nn_cpu(const at::Tensor& target, const at::Tensor& source);

#ifdef MMOPS_WITH_CUDA
at::Tensor ball_query_cuda(const at::Tensor& xyz, const at::Tensor& center_xyz, const BallQueryParams& p);
at::Tensor stack_ball_query_cuda(const at::Tensor& xyz, const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                                 const at::Tensor& center_xyz_batch_cnt, const BallQueryParams& p);
at::Tensor knn_cuda(const at::Tensor& xyz, const at::Tensor& center_xyz, int64_t k);
std::tuple<at::Tensor, at::Tensor> three_nn_cuda(const at::Tensor& target, const at::Tensor& source);
#endif

} // namespace kernels
} // namespace mmops
