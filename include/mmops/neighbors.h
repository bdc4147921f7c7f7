#pragma once
// Public C++ API of the mmops neighbour queries (through the PyTorch
// dispatcher): mmcv's ball_query (dense and stacked), knn and three_nn.
// Points are (x, y, z) in one floating dtype and device; indices are int32.
// None is differentiable. See docs/ops/<op>.md for the exact rules.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <tuple>

namespace mmops {

// mmcv ball_query. xyz [B, N, 3], center_xyz [B, npoint, 3] -> int32
// [B, npoint, sample_num]: the first sample_num points (in index order) with
// d2 == 0 or min_radius^2 <= d2 < max_radius^2; the remaining slots repeat the
// first one found; 0 when none is. 0 <= min_radius < max_radius (finite).
at::Tensor ball_query(double min_radius, double max_radius, int64_t sample_num, const at::Tensor& xyz,
                      const at::Tensor& center_xyz);

// mmcv's stacked ball_query. xyz [N1 + ... + NB, 3], center_xyz
// [M1 + ... + MB, 3], xyz_batch_cnt [B] = (N1, ...), center_xyz_batch_cnt [B]
// = (M1, ...) (int32 or int64) -> int32 [M, sample_num] of indices within the
// centre's batch with d2 < max_radius^2; an empty ball gives -1 in slot 0 and
// 0 in the others.
at::Tensor stack_ball_query(double max_radius, int64_t sample_num, const at::Tensor& xyz, const at::Tensor& center_xyz,
                            const at::Tensor& xyz_batch_cnt, const at::Tensor& center_xyz_batch_cnt);

// mmcv knn. xyz [B, N, 3] and center_xyz [B, npoint, 3] (default: xyz), or
// [B, 3, N] / [B, 3, npoint] when transposed -> int32 [B, k, npoint]: the k
// (1..100) nearest points of every centre, nearest first, ties to the lower
// index; slots beyond N hold 0.
at::Tensor knn(int64_t k, const at::Tensor& xyz, const std::optional<at::Tensor>& center_xyz = std::nullopt,
               bool transposed = false);

// mmcv three_nn. target [B, N, 3], source [B, M, 3] -> (dist [B, N, 3],
// idx int32 [B, N, 3]): the 3 nearest sources of every target, nearest first
// (ties to the lower index) and their Euclidean distances; slots beyond M
// hold index 0 and distance +inf.
std::tuple<at::Tensor, at::Tensor> three_nn(const at::Tensor& target, const at::Tensor& source);

} // namespace mmops
