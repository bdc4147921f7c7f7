#pragma once
// Public C++ API of mmops::diff_iou_rotated_2d and mmops::diff_iou_rotated_3d
// (through the dispatcher, autograd included: differentiable w.r.t. both box
// sets, with an analytic backward).

#include <ATen/core/Tensor.h>

namespace mmops {

// mmcv's diff_iou_rotated_2d: the IoU of the aligned pairs box1[b, n],
// box2[b, n] of rotated boxes (x, y, w, h, alpha), alpha in radians turning
// the w axis from x towards y. box1, box2: [B, N, 5], one floating dtype and
// device. Result [B, N]. A box with a non-finite parameter or w <= 0 or
// h <= 0 has IoU 0 (and gradient 0).
at::Tensor diff_iou_rotated_2d(const at::Tensor& box1, const at::Tensor& box2);

// mmcv's diff_iou_rotated_3d: box3d1, box3d2 [B, N, 7] (x, y, z, w, h, l,
// alpha): the (x, y, w, h, alpha) box in the ground plane, z the centre of
// the vertical extent l. IoU of the volumes, [B, N]. As above for
// non-finite parameters and w, h or l <= 0.
at::Tensor diff_iou_rotated_3d(const at::Tensor& box3d1, const at::Tensor& box3d2);

} // namespace mmops
