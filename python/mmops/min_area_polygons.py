"""min_area_polygons: the mmcv-style functional wrapper around
torch.ops.mmops.min_area_polygons(pointsets) -> Tensor (not differentiable).
mmcv has no module for it."""

import torch
from torch import Tensor

__all__ = ["min_area_polygons"]


def min_area_polygons(pointsets: Tensor) -> Tensor:
    """mmcv.ops.min_area_polygons: pointsets [N, 18] (9 points x, y) -> [N, 8], the
    corners of each set's minimum-area enclosing rectangle in mmcv's vertex order
    (see docs/ops/min_area_polygons.md)."""
    return torch.ops.mmops.min_area_polygons(pointsets)
