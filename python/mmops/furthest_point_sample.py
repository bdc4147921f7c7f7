"""furthest_point_sample: the mmcv-style functional wrappers around
torch.ops.mmops.furthest_point_sample(points_xyz, num_points) and
torch.ops.mmops.furthest_point_sample_with_dist(points_dist, num_points)
(int32 indices, not differentiable), and mmcv's points samplers
(``PointsSampler`` with the 'D-FPS', 'F-FPS' and 'FS' modes, ``calc_square_dist``)."""

from typing import List, Optional

import torch
from torch import Tensor, nn

__all__ = [
    "furthest_point_sample",
    "furthest_point_sample_with_dist",
    "calc_square_dist",
    "PointsSampler",
    "DFPSSampler",
    "FFPSSampler",
    "FSSampler",
]

_SAMPLER_MODES = ("D-FPS", "F-FPS", "FS")


def furthest_point_sample(points_xyz: Tensor, num_points: int) -> Tensor:
    """mmcv.ops.furthest_point_sample: points_xyz [B, N, 3] -> int32 [B, num_points]; point 0
    first, then the point furthest from those picked, the lowest index among equal distances
    (docs/ops/furthest_point_sample.md)."""
    return torch.ops.mmops.furthest_point_sample(points_xyz, num_points)


def furthest_point_sample_with_dist(points_dist: Tensor, num_points: int) -> Tensor:
    """mmcv.ops.furthest_point_sample_with_dist: the same on a distance matrix
    points_dist [B, N, N] -> int32 [B, num_points]."""
    return torch.ops.mmops.furthest_point_sample_with_dist(points_dist, num_points)


def calc_square_dist(point_feat_a: Tensor, point_feat_b: Tensor, norm: bool = True) -> Tensor:
    """mmcv.ops.points_sampler.calc_square_dist: [B, N, C] and [B, M, C] -> [B, N, M], the
    squared Euclidean distances, or with ``norm`` (mmcv's rule) the plain distances / C."""
    dist = torch.cdist(point_feat_a, point_feat_b)
    return dist / point_feat_a.shape[-1] if norm else torch.square(dist)


def _ffps(points: Tensor, features: Optional[Tensor], npoint: int) -> Tensor:
    """mmcv's F-FPS: FPS on the squared distances of (xyz, features) together."""
    if features is None:
        raise ValueError("mmops: the F-FPS and FS samplers need features")
    joint = torch.cat([points, features.transpose(1, 2)], dim=2)
    return furthest_point_sample_with_dist(calc_square_dist(joint, joint, norm=False), npoint)


def _sample(mode: str, points: Tensor, features: Optional[Tensor], npoint: int) -> Tensor:
    """One sampler of PointsSampler: mmcv's D-FPS, F-FPS or FS (F-FPS indices, then D-FPS ones)."""
    if mode == "D-FPS":
        return furthest_point_sample(points, npoint)
    if mode == "F-FPS":
        return _ffps(points, features, npoint)
    return torch.cat([_ffps(points, features, npoint), furthest_point_sample(points, npoint)], dim=1)


class DFPSSampler(nn.Module):
    """mmcv's DFPSSampler: FPS on the Euclidean distances of the points."""

    def forward(self, points: Tensor, features: Optional[Tensor], npoint: int) -> Tensor:
        return _sample("D-FPS", points, features, npoint)


class FFPSSampler(nn.Module):
    """mmcv's FFPSSampler: FPS on the distances of the points' xyz and features together."""

    def forward(self, points: Tensor, features: Optional[Tensor], npoint: int) -> Tensor:
        return _sample("F-FPS", points, features, npoint)


class FSSampler(nn.Module):
    """mmcv's FSSampler: F-FPS indices, then D-FPS indices."""

    def forward(self, points: Tensor, features: Optional[Tensor], npoint: int) -> Tensor:
        return _sample("FS", points, features, npoint)


class PointsSampler(nn.Module):
    """mmcv.ops.PointsSampler: one sampler per entry of ``fps_mod_list`` ('D-FPS', 'F-FPS',
    'FS'), each on its range of the points: from where the previous range ended to
    ``fps_sample_range_list[i]`` (-1: to the end); the indices (int32, into the whole cloud)
    concatenated. Half inputs are sampled in float32, as mmcv."""

    def __init__(
        self, num_point: List[int], fps_mod_list: List[str] = ["D-FPS"], fps_sample_range_list: List[int] = [-1]
    ) -> None:
        super().__init__()
        if not len(num_point) == len(fps_mod_list) == len(fps_sample_range_list):
            raise ValueError("mmops: num_point, fps_mod_list and fps_sample_range_list must have one length")
        for mode in fps_mod_list:
            if mode not in _SAMPLER_MODES:
                raise KeyError(f"mmops: supported sampler types are {_SAMPLER_MODES}, but got {mode!r}")
        self.num_point = list(num_point)
        self.fps_mod_list = list(fps_mod_list)
        self.fps_sample_range_list = list(fps_sample_range_list)

    def forward(self, points_xyz: Tensor, features: Optional[Tensor]) -> Tensor:
        if points_xyz.dtype == torch.half:
            points_xyz = points_xyz.float()
        if features is not None and features.dtype == torch.half:
            features = features.float()
        indices: List[Tensor] = []
        start = 0
        for mode, npoint, end in zip(self.fps_mod_list, self.num_point, self.fps_sample_range_list):
            if end >= points_xyz.shape[1]:
                raise ValueError(f"mmops: fps_sample_range {end} is not below the {points_xyz.shape[1]} points")
            stop = points_xyz.shape[1] if end == -1 else end
            part = None if features is None else features[:, :, start:stop]
            indices.append(_sample(mode, points_xyz[:, start:stop].contiguous(), part, npoint) + start)
            start = end
        return torch.cat(indices, dim=1)
