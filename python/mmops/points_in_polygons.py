"""points_in_polygons: the mmcv-style functional wrapper around
torch.ops.mmops.points_in_polygons(points, polygons) -> Tensor (not
differentiable). mmcv has no module for it."""

import torch
from torch import Tensor

__all__ = ["points_in_polygons"]


def points_in_polygons(points: Tensor, polygons: Tensor) -> Tensor:
    """mmcv.ops.points_in_polygons: points [N, 2], polygons [M, 8] -> [N, M] of 1.0
    (inside) / 0.0 (outside), mmcv's crossing rule on the boundary (see
    docs/ops/points_in_polygons.md)."""
    return torch.ops.mmops.points_in_polygons(points, polygons)
