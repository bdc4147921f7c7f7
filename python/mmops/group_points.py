"""group_points: the mmcv-style functional wrappers around
torch.ops.mmops.gather_points(features, indices),
torch.ops.mmops.group_points(features, indices) and
torch.ops.mmops.stack_group_points(features, features_batch_cnt, indices, indices_batch_cnt)
(differentiable in features, int32 indices), and mmcv's ``GroupAll``.
(``QueryAndGroup`` needs ball_query and lives with it.)"""

from typing import Optional

import torch
from torch import Tensor, nn

__all__ = ["gather_points", "grouping_operation", "GroupAll"]


def gather_points(features: Tensor, indices: Tensor) -> Tensor:
    """mmcv.ops.gather_points: features [B, C, N], int32 indices [B, M] -> [B, C, M]."""
    return torch.ops.mmops.gather_points(features, indices)


def grouping_operation(
    features: Tensor,
    indices: Tensor,
    features_batch_cnt: Optional[Tensor] = None,
    indices_batch_cnt: Optional[Tensor] = None,
) -> Tensor:
    """mmcv.ops.grouping_operation: features [B, C, N] and int32 indices [B, npoint, nsample]
    -> [B, C, npoint, nsample]; or, with both batch counts (int32 [B]), stacked batches:
    features [N1 + N2 + ..., C], indices [M1 + M2 + ..., nsample] relative to their batch's
    first feature -> [M1 + M2 + ..., C, nsample]."""
    if features_batch_cnt is not None and indices_batch_cnt is not None:
        return torch.ops.mmops.stack_group_points(features, features_batch_cnt, indices, indices_batch_cnt)
    return torch.ops.mmops.group_points(features, indices)


class GroupAll(nn.Module):
    """mmcv.ops.GroupAll: every point in one group. xyz [B, N, 3], features [B, C, N] or None
    -> [B, 3 + C, 1, N] (xyz first, when ``use_xyz``), [B, C, 1, N] or [B, 3, 1, N]."""

    def __init__(self, use_xyz: bool = True):
        super().__init__()
        self.use_xyz = use_xyz

    def forward(self, xyz: Tensor, new_xyz: Optional[Tensor], features: Optional[Tensor] = None) -> Tensor:
        grouped_xyz = xyz.transpose(1, 2).unsqueeze(2)
        if features is None:
            return grouped_xyz
        grouped_features = features.unsqueeze(2)
        return torch.cat([grouped_xyz, grouped_features], dim=1) if self.use_xyz else grouped_features
