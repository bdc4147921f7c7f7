"""boxes_overlap_bev, boxes_iou_bev, nms_bev and nms_normal_bev: mmcv 2.x's
iou3d functions (bird's-eye view) around

    torch.ops.mmops.boxes_overlap_bev(boxes_a [N, 7], boxes_b [M, 7]) -> [N, M] areas
    torch.ops.mmops.boxes_iou_bev(boxes_a [N, 5], boxes_b [M, 5]) -> [N, M] IoU
    torch.ops.mmops.nms_bev(boxes [N, 5], scores, thresh, pre_max_size=None, post_max_size=None) -> keep
    torch.ops.mmops.nms_normal_bev(boxes [N, 5], scores, thresh) -> keep

[*, 7] boxes are (x, y, z, dx, dy, dz, heading), [*, 5] boxes (x1, y1, x2, y2,
ry). keep: int64 indices by decreasing score (ties: lower index first; a NaN
score after every number). Not differentiable (as mmcv); mmcv has no
nn.Module for them. The fake kernels of the NMS ops: mmops/_fake.py.
"""

from typing import Optional

import torch
from torch import Tensor

__all__ = ["boxes_overlap_bev", "boxes_iou_bev", "nms_bev", "nms_normal_bev"]


def boxes_overlap_bev(boxes_a: Tensor, boxes_b: Tensor) -> Tensor:
    """mmcv.ops.boxes_overlap_bev: [N, M] BEV intersection areas of [N, 7] and
    [M, 7] boxes (z and dz ignored)."""
    return torch.ops.mmops.boxes_overlap_bev(boxes_a, boxes_b)


def boxes_iou_bev(boxes_a: Tensor, boxes_b: Tensor) -> Tensor:
    """mmcv.ops.boxes_iou_bev: [N, M] BEV IoU of [N, 5] and [M, 5]
    (x1, y1, x2, y2, ry) boxes, as mmcv's box_iou_rotated of the converted boxes."""
    return torch.ops.mmops.boxes_iou_bev(boxes_a, boxes_b)


def nms_bev(
    boxes: Tensor,
    scores: Tensor,
    thresh: float,
    pre_max_size: Optional[int] = None,
    post_max_size: Optional[int] = None,
) -> Tensor:
    """mmcv.ops.nms_bev: kept indices of rotated NMS on [N, 5] (x1, y1, x2, y2, ry)
    boxes; only the best pre_max_size boxes take part, the first post_max_size
    kept are returned."""
    return torch.ops.mmops.nms_bev(boxes, scores, float(thresh), pre_max_size, post_max_size)


def nms_normal_bev(boxes: Tensor, scores: Tensor, thresh: float) -> Tensor:
    """mmcv.ops.nms_normal_bev: kept indices of axis-aligned NMS on [N, 5]
    (x1, y1, x2, y2, ry) boxes, the angle ignored."""
    return torch.ops.mmops.nms_normal_bev(boxes, scores, float(thresh))
