"""points_in_boxes: mmcv's points_in_boxes_part / _all / _cpu around
torch.ops.mmops.points_in_boxes_part / points_in_boxes_all (not
differentiable). Boxes are mmcv's LiDAR boxes [x, y, z, dx, dy, dz, rz] with z
the bottom centre; the inside rule is in docs/ops/points_in_boxes_all.md."""

import torch
from torch import Tensor

__all__ = ["points_in_boxes_part", "points_in_boxes_all", "points_in_boxes_cpu"]


def points_in_boxes_part(points: Tensor, boxes: Tensor) -> Tensor:
    """mmcv.ops.points_in_boxes_part: points [B, N, 3], boxes [B, M, 7] -> int32 [B, N],
    the index of the first box of the batch containing each point, -1 if none."""
    return torch.ops.mmops.points_in_boxes_part(points, boxes)


def points_in_boxes_all(points: Tensor, boxes: Tensor) -> Tensor:
    """mmcv.ops.points_in_boxes_all: points [B, N, 3], boxes [B, M, 7] -> int32 [B, N, M]
    of 1 (box m contains point n) / 0."""
    return torch.ops.mmops.points_in_boxes_all(points, boxes)


def points_in_boxes_cpu(points: Tensor, boxes: Tensor) -> Tensor:
    """mmcv.ops.points_in_boxes_cpu: the same result as points_in_boxes_all (int32
    [B, N, M]), on any device; computed in the inputs' dtype (mmcv: float32)."""
    return torch.ops.mmops.points_in_boxes_all(points, boxes)
