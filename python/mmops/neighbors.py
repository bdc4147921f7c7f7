"""Neighbour queries of point clouds: the mmcv-style functional wrappers around
torch.ops.mmops.ball_query / stack_ball_query / knn / three_nn (none is
differentiable; indices are int32). mmcv has no nn.Module for them. The exact
rules (boundaries, ties, NaN, fills) are in docs/ops/<op>.md."""

from typing import Optional, Tuple

import torch
from torch import Tensor

__all__ = ["ball_query", "knn", "three_nn"]


def ball_query(
    min_radius: float,
    max_radius: float,
    sample_num: int,
    xyz: Tensor,
    center_xyz: Tensor,
    xyz_batch_cnt: Optional[Tensor] = None,
    center_xyz_batch_cnt: Optional[Tensor] = None,
) -> Tensor:
    """mmcv.ops.ball_query.

    Dense: xyz [B, N, 3], center_xyz [B, npoint, 3] -> int32 [B, npoint, sample_num],
    the first sample_num points (index order) with d2 == 0 or min_radius^2 <= d2 <
    max_radius^2; free slots repeat the first one found; 0 where none is.

    Stacked (both counts given; with one, the dense query runs, as in mmcv): xyz [N1 + ..., 3],
    center_xyz [M1 + ..., 3], xyz_batch_cnt / center_xyz_batch_cnt [B] -> int32 [M, sample_num] of indices within
    the centre's batch with d2 < max_radius^2 (min_radius unused, as in mmcv); an empty
    ball gives -1 in slot 0.
    """
    if xyz_batch_cnt is not None and center_xyz_batch_cnt is not None:
        return torch.ops.mmops.stack_ball_query(
            float(max_radius), int(sample_num), xyz, center_xyz, xyz_batch_cnt, center_xyz_batch_cnt
        )
    return torch.ops.mmops.ball_query(float(min_radius), float(max_radius), int(sample_num), xyz, center_xyz)


def knn(k: int, xyz: Tensor, center_xyz: Optional[Tensor] = None, transposed: bool = False) -> Tensor:
    """mmcv.ops.knn: xyz [B, N, 3], center_xyz [B, npoint, 3] (default: xyz), or
    [B, 3, N] / [B, 3, npoint] when transposed -> int32 [B, k, npoint], the k (1..100)
    nearest points of every centre, nearest first, ties to the lower index."""
    return torch.ops.mmops.knn(int(k), xyz, center_xyz, bool(transposed))


def three_nn(target: Tensor, source: Tensor) -> Tuple[Tensor, Tensor]:
    """mmcv.ops.three_nn: target [B, N, 3], source [B, M, 3] -> (dist [B, N, 3]
    Euclidean, idx int32 [B, N, 3]) of the 3 nearest sources, nearest first."""
    dist, idx = torch.ops.mmops.three_nn(target, source)
    return dist, idx
