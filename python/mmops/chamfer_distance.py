"""chamfer_distance: the functional wrapper (mmcv.ops.chamfer_distance) and a module."""

from typing import Tuple

import torch
from torch import Tensor, nn


def chamfer_distance(xyz1: Tensor, xyz2: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """2-D chamfer distance with mmcv's conventions (docs/ops/chamfer_distance.md).

    xyz1: [B, N, 2], xyz2: [B, M, 2]. Returns (dist1 [B, N], dist2 [B, M], idx1 [B, N] int32,
    idx2 [B, M] int32): the squared distance of every point to its nearest point of the other
    set and that point's index (the lowest index among equal distances; a NaN distance loses
    to every number). Differentiable w.r.t. xyz1 and xyz2 through dist1 and dist2.
    """
    dist1, dist2, idx1, idx2 = torch.ops.mmops.chamfer_distance(xyz1, xyz2)
    return dist1, dist2, idx1, idx2


class ChamferDistance(nn.Module):
    """chamfer_distance as a module: forward(xyz1, xyz2) -> (dist1, dist2, idx1, idx2)."""

    def forward(self, xyz1: Tensor, xyz2: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        return chamfer_distance(xyz1, xyz2)


__all__ = ["chamfer_distance", "ChamferDistance"]
