#pragma once
// Public C++ API of mmops::box_iou_rotated and box_iou_quadri (mmcv's ops of
// the same names). Calls go through the PyTorch dispatcher.
//
// Rotated boxes are [N, 5] (cx, cy, w, h, angle in radians), quadrilaterals
// [N, 8] (x1, y1, ..., x4, y4, convex, either orientation); float, double,
// half or bfloat16 (computed in float, double in double). A box with a
// non-finite value, w <= 0 or h <= 0 (or a quadrilateral of area 0) overlaps
// nothing: 0. Not differentiable.

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

namespace mmops {

// Overlaps [N, M] (aligned: [N], row i with row i) of boxes1 [N, 5] and
// boxes2 [M, 5]. mode: "iou" or "iof" (intersection over boxes1's area).
// clockwise = false negates the angles first (mmcv's flag).
at::Tensor box_iou_rotated(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode = "iou",
                           bool aligned = false, bool clockwise = true);

// The same for quadrilaterals [N, 8] and [M, 8].
at::Tensor box_iou_quadri(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode = "iou",
                          bool aligned = false);

} // namespace mmops
