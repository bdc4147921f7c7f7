"""roipoint_pool3d: the functional wrapper and mmcv's RoIPointPool3d module
(TorchScript-scriptable) around torch.ops.mmops.roipoint_pool3d (not
differentiable, as in mmcv)."""

from typing import Tuple

import torch
from torch import Tensor, nn

__all__ = ["roipoint_pool3d", "RoIPointPool3d"]


def roipoint_pool3d(
    points: Tensor, point_features: Tensor, boxes3d: Tensor, num_sampled_points: int = 512
) -> Tuple[Tensor, Tensor]:
    """mmcv's RoIPointPool3dFunction: points [B, N, 3], point_features [B, N, C], boxes3d
    [B, M, 7] -> (pooled_features [B, M, num_sampled_points, 3 + C], pooled_empty_flag int32
    [B, M]): the first points inside each box in index order, repeated when fewer
    (docs/ops/roipoint_pool3d.md)."""
    return torch.ops.mmops.roipoint_pool3d(points, point_features, boxes3d, int(num_sampled_points))


class RoIPointPool3d(nn.Module):
    """mmcv.ops.RoIPointPool3d: forward(points, point_features, boxes3d)
    -> (pooled_features, pooled_empty_flag)."""

    def __init__(self, num_sampled_points: int = 512) -> None:
        super().__init__()
        self.num_sampled_points = int(num_sampled_points)

    def forward(self, points: Tensor, point_features: Tensor, boxes3d: Tensor) -> Tuple[Tensor, Tensor]:
        return roipoint_pool3d(points, point_features, boxes3d, self.num_sampled_points)

    def extra_repr(self) -> str:
        return f"num_sampled_points={self.num_sampled_points}"
