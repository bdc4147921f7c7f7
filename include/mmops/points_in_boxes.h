#pragma once
// Public C++ API of mmops::points_in_boxes_part / points_in_boxes_all
// (through the PyTorch dispatcher).

#include <ATen/core/Tensor.h>

namespace mmops {

// mmcv points_in_boxes_part. points [B, N, 3] (x, y, z), boxes [B, M, 7]
// (x, y, z of the bottom centre, dx, dy, dz, yaw rz), one floating dtype and
// device. Returns int32 [B, N]: the index of the first (lowest-index) box of
// the same batch containing the point, -1 if none. Inside: strictly within
// dx / dy in the box frame, |z - centre z| <= dz / 2; non-finite values:
// outside. Not differentiable.
at::Tensor points_in_boxes_part(const at::Tensor& points, const at::Tensor& boxes);

// mmcv points_in_boxes_all (and points_in_boxes_cpu): int32 [B, N, M], 1 where
// box m contains point n (the rule above), else 0. Not differentiable.
at::Tensor points_in_boxes_all(const at::Tensor& points, const at::Tensor& boxes);

} // namespace mmops
