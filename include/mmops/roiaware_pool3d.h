#pragma once
// Public C++ API of mmops::roiaware_pool3d (through the PyTorch dispatcher).

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>

namespace mmops {

// mmcv roiaware_pool3d (PartA2). rois [N, 7] (x, y, z of the bottom centre,
// dx, dy, dz, yaw), pts [P, 3], pts_feature [P, C], one floating dtype and
// device; out_size = {out_x, out_y, out_z}. Each roi is cut into out_x *
// out_y * out_z voxels along its own axes; every voxel keeps the first
// max_pts_per_voxel - 1 points inside it (index order, mmcv's rule) and
// returns their max (mode "max": the first maximum wins, NaN wins) or mean
// ("avg") per channel, 0 when empty. Returns [N, out_x, out_y, out_z, C].
// Differentiable w.r.t. pts_feature (deterministic backward).
at::Tensor roiaware_pool3d(const at::Tensor& rois, const at::Tensor& pts, const at::Tensor& pts_feature,
                           at::IntArrayRef out_size, int64_t max_pts_per_voxel = 128, c10::string_view mode = "max");

} // namespace mmops
