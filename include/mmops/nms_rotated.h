#pragma once
// Public C++ API of mmops::nms_rotated and nms_quadri (mmcv's ops of the same
// names). Calls go through the PyTorch dispatcher.
//
// boxes: [N, 5] (cx, cy, w, h, angle in radians) or [N, 8] quadrilaterals,
// any floating dtype; scores [N] floating; labels (optional) [N], integer or
// floating: boxes of different labels never suppress each other. Order:
// decreasing score, ties to the lower index, a NaN score after every number. A
// box with a non-finite value overlaps nothing: it is kept by its score and
// suppresses nothing. Not differentiable.

#include <ATen/core/Tensor.h>

#include <optional>

namespace mmops {

// Greedy NMS of rotated boxes: the kept indices (int64) by decreasing score. A
// box is suppressed by a kept box of higher rank (and the same label) whose
// IoU with it is > iou_threshold. clockwise = false negates the angles.
at::Tensor nms_rotated(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                       const std::optional<at::Tensor>& labels = std::nullopt, bool clockwise = true);

// The same for quadrilaterals [N, 8].
at::Tensor nms_quadri(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                      const std::optional<at::Tensor>& labels = std::nullopt);

} // namespace mmops
