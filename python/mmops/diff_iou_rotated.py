"""diff_iou_rotated_2d / diff_iou_rotated_3d: the mmcv-style functional
wrappers around torch.ops.mmops.diff_iou_rotated_2d(box1, box2) and
torch.ops.mmops.diff_iou_rotated_3d(box3d1, box3d2) (IoU of aligned pairs of
rotated boxes, with an analytic backward), and modules calling them (mmcv has
no module of its own for these functions).
"""

import torch
from torch import Tensor, nn

__all__ = ["DiffIoURotated2d", "DiffIoURotated3d", "diff_iou_rotated_2d", "diff_iou_rotated_3d"]


def diff_iou_rotated_2d(box1: Tensor, box2: Tensor) -> Tensor:
    """mmcv.ops.diff_iou_rotated_2d (see docs/ops/diff_iou_rotated.md).

    box1, box2: [B, N, 5] (x, y, w, h, alpha), alpha in radians turning the w
    axis from x towards y; returns the [B, N] IoU of box1[b, n] with box2[b, n],
    differentiable w.r.t. both. Boxes with w or h <= 0 or a non-finite
    parameter have IoU 0 and gradient 0.
    """
    return torch.ops.mmops.diff_iou_rotated_2d(box1, box2)


def diff_iou_rotated_3d(box3d1: Tensor, box3d2: Tensor) -> Tensor:
    """mmcv.ops.diff_iou_rotated_3d (see docs/ops/diff_iou_rotated.md).

    box3d1, box3d2: [B, N, 7] (x, y, z, w, h, l, alpha): the (x, y, w, h, alpha)
    box in the ground plane, z the centre of the vertical extent l; returns the
    [B, N] volume IoU, differentiable w.r.t. both.
    """
    return torch.ops.mmops.diff_iou_rotated_3d(box3d1, box3d2)


class DiffIoURotated2d(nn.Module):
    """diff_iou_rotated_2d as a module: forward(box1, box2) -> [B, N] IoU."""

    def forward(self, box1: Tensor, box2: Tensor) -> Tensor:
        return diff_iou_rotated_2d(box1, box2)


class DiffIoURotated3d(nn.Module):
    """diff_iou_rotated_3d as a module: forward(box3d1, box3d2) -> [B, N] IoU."""

    def forward(self, box3d1: Tensor, box3d2: Tensor) -> Tensor:
        return diff_iou_rotated_3d(box3d1, box3d2)
