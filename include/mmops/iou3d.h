#pragma once
// Public C++ API of mmops::boxes_overlap_bev, boxes_iou_bev, nms_bev and
// nms_normal_bev (mmcv 2.x's iou3d ops of the same names, bird's-eye view).
// Calls go through the PyTorch dispatcher.
//
// Box formats, as mmcv 2.x: boxes_overlap_bev takes [N, 7] (x, y, z, dx, dy,
// dz, heading); boxes_iou_bev, nms_bev and nms_normal_bev take [N, 5] (x1, y1,
// x2, y2, ry), i.e. the rotated box ((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1,
// y2 - y1, ry). Angles in radians, turning the box's x side from +x towards
// +y. float, double, half or bfloat16 (computed in float, double in double).
// The overlap is the exact convex clip: identical boxes have IoU exactly 1,
// boxes that only touch 0. A box with a non-finite value or a side <= 0
// overlaps nothing. Not differentiable.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace mmops {

// [N, M] BEV intersection areas of boxes_a [N, 7] and boxes_b [M, 7] (z, dz ignored).
at::Tensor boxes_overlap_bev(const at::Tensor& boxes_a, const at::Tensor& boxes_b);

// [N, M] BEV IoU of boxes_a [N, 5] and boxes_b [M, 5] (x1, y1, x2, y2, ry).
at::Tensor boxes_iou_bev(const at::Tensor& boxes_a, const at::Tensor& boxes_b);

// Greedy NMS of [N, 5] (x1, y1, x2, y2, ry) boxes by their rotated IoU (as
// boxes_iou_bev): the kept indices (int64) by decreasing score (ties to the
// lower index, a NaN score last). A box is suppressed by a kept box of higher
// rank whose IoU with it is > thresh. pre_max_size: only the best that many
// boxes take part; post_max_size: only the first that many kept are returned.
at::Tensor nms_bev(const at::Tensor& boxes, const at::Tensor& scores, double thresh,
                   std::optional<int64_t> pre_max_size = std::nullopt,
                   std::optional<int64_t> post_max_size = std::nullopt);

// The same with the angle ignored: axis-aligned (x1, y1, x2, y2) boxes, as mmops::nms.
at::Tensor nms_normal_bev(const at::Tensor& boxes, const at::Tensor& scores, double thresh);

} // namespace mmops
