#pragma once
// Public C++ API of mmops::convex_iou and mmops::convex_giou (through the
// PyTorch dispatcher, so autograd works from C++ too).

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {

// mmcv convex_iou. pointsets [N, 18] (9 points x, y), polygons [K, 8]
// (x1, y1, ..., x4, y4, convex, either orientation), one floating dtype and
// device. Returns [N, K]: IoU of each set's convex hull with each polygon
// (0 for a degenerate hull or polygon, or non-finite coordinates). Not
// differentiable.
at::Tensor convex_iou(const at::Tensor& pointsets, const at::Tensor& polygons);

// mmcv convex_giou. pointsets [N, 18], polygons [N, 8], row with row.
// Returns (giou [N], grad [N, 18]): the generalized IoU of each set's hull
// with its polygon and d giou / d pointsets (as mmcv returns it). giou is
// differentiable w.r.t. pointsets (backward: grad_giou[:, None] * grad).
std::tuple<at::Tensor, at::Tensor> convex_giou(const at::Tensor& pointsets, const at::Tensor& polygons);

} // namespace mmops
