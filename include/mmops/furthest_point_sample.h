#pragma once
// Public C++ API of mmops::furthest_point_sample(_with_dist) (through the
// PyTorch dispatcher).

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {

// mmcv furthest_point_sample. points_xyz [B, N, 3] floating; returns int32
// [B, num_points]: index 0 first, then repeatedly the point furthest (squared
// Euclidean distance) from the points picked so far, the lowest index among
// equal distances. num_points may exceed N (points then repeat). Not
// differentiable. Rules for NaN: docs/ops/furthest_point_sample.md.
at::Tensor furthest_point_sample(const at::Tensor& points_xyz, int64_t num_points);

// mmcv furthest_point_sample_with_dist: the same on a distance matrix
// points_dist [B, N, N] (points_dist[b, p, k]: distance of point k to point p).
at::Tensor furthest_point_sample_with_dist(const at::Tensor& points_dist, int64_t num_points);

} // namespace mmops
