"""group_points: the mmcv-style functional wrappers around
torch.ops.mmops.gather_points(features, indices),
torch.ops.mmops.group_points(features, indices) and
torch.ops.mmops.stack_group_points(features, features_batch_cnt, indices, indices_batch_cnt)
(differentiable in features, int32 indices), and mmcv's ``GroupAll`` and
``QueryAndGroup`` (ball query or knn, then grouping)."""

from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .neighbors import ball_query, knn

__all__ = ["gather_points", "grouping_operation", "GroupAll", "QueryAndGroup"]


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


class QueryAndGroup(nn.Module):
    """mmcv.ops.QueryAndGroup: the ``sample_num`` neighbours of every centre (ball query of
    [min_radius, max_radius), or knn when ``max_radius`` is None), grouped.

    forward(points_xyz [B, N, 3], center_xyz [B, npoint, 3], features [B, C, N] or None) ->
    [B, 3 + C, npoint, sample_num] (the xyz offsets from the centre first, divided by
    ``max_radius`` when ``normalize_xyz``; without ``use_xyz`` only the features), followed,
    when asked for, by grouped_xyz [B, 3, npoint, sample_num], unique_cnt [B, npoint] and the
    int32 indices. ``uniform_sample`` refills every group with random draws among its unique
    indices (torch's global generator), as mmcv does. An eager module, as mmcv's: its output
    type depends on the flags; a scripted model calls the ops (test_pointnet_sa.py)."""

    def __init__(
        self,
        max_radius: Optional[float],
        sample_num: int,
        min_radius: float = 0.0,
        use_xyz: bool = True,
        return_grouped_xyz: bool = False,
        normalize_xyz: bool = False,
        uniform_sample: bool = False,
        return_unique_cnt: bool = False,
        return_grouped_idx: bool = False,
    ):
        super().__init__()
        if return_unique_cnt and not uniform_sample:
            raise ValueError("mmops: QueryAndGroup returns unique_cnt only with uniform_sample=True")
        if max_radius is None and normalize_xyz:
            raise ValueError("mmops: QueryAndGroup cannot normalize_xyz without a max_radius (knn grouping)")
        self.max_radius = max_radius
        self.min_radius = min_radius
        self.sample_num = sample_num
        self.use_xyz = use_xyz
        self.return_grouped_xyz = return_grouped_xyz
        self.normalize_xyz = normalize_xyz
        self.uniform_sample = uniform_sample
        self.return_unique_cnt = return_unique_cnt
        self.return_grouped_idx = return_grouped_idx

    def _indices(self, points_xyz: Tensor, center_xyz: Tensor) -> Tensor:
        if self.max_radius is None:
            return knn(self.sample_num, points_xyz, center_xyz, False).transpose(1, 2).contiguous()
        return ball_query(self.min_radius, self.max_radius, self.sample_num, points_xyz, center_xyz)

    def _uniform(self, idx: Tensor) -> Tuple[Tensor, Tensor]:
        unique_cnt = torch.zeros(idx.shape[0], idx.shape[1])
        idx = idx.clone()
        for b in range(idx.shape[0]):
            for r in range(idx.shape[1]):
                unique = torch.unique(idx[b, r])
                count = unique.shape[0]
                unique_cnt[b, r] = count
                draws = torch.randint(0, count, (self.sample_num - count,), dtype=torch.long)
                idx[b, r] = torch.cat((unique, unique[draws.to(unique.device)]))
        return idx, unique_cnt

    def forward(
        self, points_xyz: Tensor, center_xyz: Tensor, features: Optional[Tensor] = None
    ) -> Union[Tensor, Tuple[Tensor, ...]]:
        idx = self._indices(points_xyz, center_xyz)
        unique_cnt: Optional[Tensor] = None
        if self.uniform_sample:
            idx, unique_cnt = self._uniform(idx)
        grouped_xyz = grouping_operation(points_xyz.transpose(1, 2).contiguous(), idx)
        offsets = grouped_xyz - center_xyz.transpose(1, 2).unsqueeze(-1)
        if self.normalize_xyz:
            offsets = offsets / self.max_radius
        if features is None:
            if not self.use_xyz:
                raise ValueError("mmops: QueryAndGroup needs features or use_xyz=True")
            new_features = offsets
        else:
            grouped = grouping_operation(features, idx)
            new_features = torch.cat([offsets, grouped], dim=1) if self.use_xyz else grouped
        out: List[Tensor] = [new_features]
        if self.return_grouped_xyz:
            out.append(grouped_xyz)
        if self.return_unique_cnt and unique_cnt is not None:
            out.append(unique_cnt)
        if self.return_grouped_idx:
            out.append(idx)
        return out[0] if len(out) == 1 else tuple(out)
