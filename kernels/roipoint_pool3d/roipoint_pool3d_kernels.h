#pragma once
// Device kernels of roipoint_pool3d. Callers (src/roipoint_pool3d) validate
// the arguments first; these only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {
namespace kernels {

// points [B, N, 3], point_features [B, N, C], boxes3d [B, M, 7] (any strides;
// N < 2^31), num_sampled_points S >= 1. Returns (pooled [B, M, S, 3 + C] in
// the points' dtype, empty_flag int32 [B, M]): per box the first S points
// inside it (index order; kernels/common/box3d.h), slot k holding point
// kept[k % count] (xyz, then its features); a box with no point: zeros and
// flag 1.
std::tuple<at::Tensor, at::Tensor> roipoint_pool3d_cpu(const at::Tensor& points, const at::Tensor& point_features,
                                                       const at::Tensor& boxes3d, int64_t num_sampled_points);

#ifdef MMOPS_WITH_CUDA
std::tuple<at::Tensor, at::Tensor> roipoint_pool3d_cuda(const at::Tensor& points, const at::Tensor& point_features,
                                                        const at::Tensor& boxes3d, int64_t num_sampled_points);
#endif

} // namespace kernels
} // namespace mmops
