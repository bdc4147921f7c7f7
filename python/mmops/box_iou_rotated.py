"""box_iou_rotated and box_iou_quadri: mmcv-style functional wrappers around

    torch.ops.mmops.box_iou_rotated(boxes1, boxes2, mode="iou", aligned=False, clockwise=True) -> Tensor
    torch.ops.mmops.box_iou_quadri(boxes1, boxes2, mode="iou", aligned=False) -> Tensor

Rotated boxes are (cx, cy, w, h, angle in radians), quadrilaterals (x1, y1,
..., x4, y4). Not differentiable (as mmcv). mmcv has no nn.Module for them.
"""

import torch
from torch import Tensor

__all__ = ["box_iou_rotated", "box_iou_quadri"]


def box_iou_rotated(
    bboxes1: Tensor, bboxes2: Tensor, mode: str = "iou", aligned: bool = False, clockwise: bool = True
) -> Tensor:
    """mmcv.ops.box_iou_rotated: [N, M] overlaps (aligned: [N]) of [N, 5] and
    [M, 5] rotated boxes, "iou" or "iof" (over bboxes1's area). clockwise=False
    negates the angles. A box with a non-finite value or w, h <= 0: 0."""
    return torch.ops.mmops.box_iou_rotated(bboxes1, bboxes2, mode, bool(aligned), bool(clockwise))


def box_iou_quadri(bboxes1: Tensor, bboxes2: Tensor, mode: str = "iou", aligned: bool = False) -> Tensor:
    """mmcv.ops.box_iou_quadri: overlaps of [N, 8] and [M, 8] convex
    quadrilaterals (either orientation)."""
    return torch.ops.mmops.box_iou_quadri(bboxes1, bboxes2, mode, bool(aligned))
