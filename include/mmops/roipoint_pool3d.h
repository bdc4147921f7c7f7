#pragma once
// Public C++ API of mmops::roipoint_pool3d (through the PyTorch dispatcher).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

// mmcv roipoint_pool3d. points [B, N, 3], point_features [B, N, C], boxes3d
// [B, M, 7] (x, y, z of the bottom centre, dx, dy, dz, yaw), one floating
// dtype and device. Returns (pooled_features [B, M, S, 3 + C],
// pooled_empty_flag int32 [B, M]) with S = num_sampled_points: per box the
// first S points inside it in index order (xyz, then features); with fewer,
// slot k repeats point k % count; a box with none gives zeros and flag 1.
// Not differentiable.
std::tuple<at::Tensor, at::Tensor> roipoint_pool3d(const at::Tensor& points, const at::Tensor& point_features,
                                                   const at::Tensor& boxes3d, int64_t num_sampled_points = 512);

} // namespace mmops
