#pragma once
// Device kernels of furthest_point_sample and furthest_point_sample_with_dist.
// Callers (src/furthest_point_sample) validate the arguments first; these
// functions only compute. Rules: furthest_point_sample_math.h.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {
namespace kernels {

// int32 [B, num_points]: furthest point sampling of points_xyz [B, N, 3] by
// squared Euclidean distance (computed in float for half/bfloat16).
at::Tensor furthest_point_sample_cpu(const at::Tensor& points_xyz, int64_t num_points);

// The same on a distance matrix points_dist [B, N, N]: the distance of point k
// to the picked point p is points_dist[b, p, k].
at::Tensor furthest_point_sample_with_dist_cpu(const at::Tensor& points_dist, int64_t num_points);

#ifdef MMOPS_WITH_CUDA
at::Tensor furthest_point_sample_cuda(const at::Tensor& points_xyz, int64_t num_points);
at::Tensor furthest_point_sample_with_dist_cuda(const at::Tensor& points_dist, int64_t num_points);
#endif

} // namespace kernels
} // namespace mmops
