"""hard_voxelize, dynamic_voxelize and dynamic_scatter: mmcv-style wrappers and
modules (mmcv.ops.voxelize, mmcv.ops.scatter_points) around torch.ops.mmops (the
fake kernels of the data-dependent ones: mmops/_fake.py).

The ops themselves (what TorchScript, torch.compile and C++ see):
    torch.ops.mmops.dynamic_voxelize(points, voxel_size, coors_range) -> coors [N, 3]
    torch.ops.mmops.hard_voxelize(points, voxel_size, coors_range, max_points=35,
                                  max_voxels=20000) -> (voxels, coors, num_points_per_voxel)
    torch.ops.mmops.dynamic_scatter(feats, coors, reduce="max") -> (voxel_feats, voxel_coors)
Voxel coordinates are int32 (z, y, x); a point is in the voxel floor((p - min) / size)
along each axis (voxel_size and coors_range as float32, mmcv's floor rule), out of
range (NaN / Inf too) unless 0 <= cell < round((max - min) / size).
"""

from typing import List, Sequence, Tuple, Union

import torch
from torch import Tensor

__all__ = ["voxelization", "hard_voxelize", "dynamic_voxelize", "Voxelization", "dynamic_scatter", "DynamicScatter"]


def _floats(values: List[float]) -> List[float]:
    return [float(v) for v in values]


def dynamic_voxelize(points: Tensor, voxel_size: List[float], coors_range: List[float]) -> Tensor:
    """The voxel (z, y, x) of every point, int32 [N, 3]; a row of -1 out of range."""
    return torch.ops.mmops.dynamic_voxelize(points, _floats(voxel_size), _floats(coors_range))


def hard_voxelize(
    points: Tensor, voxel_size: List[float], coors_range: List[float], max_points: int = 35, max_voxels: int = 20000
) -> Tuple[Tensor, Tensor, Tensor]:
    """(voxels [M, max_points, ndim], coors [M, 3] int32 (z, y, x), num_points_per_voxel [M]
    int32): voxels in the order of their first point, points in input order; points past
    max_points in a voxel and voxels past max_voxels are dropped."""
    return torch.ops.mmops.hard_voxelize(
        points, _floats(voxel_size), _floats(coors_range), int(max_points), int(max_voxels)
    )


def voxelization(
    points: Tensor,
    voxel_size: List[float],
    coors_range: List[float],
    max_points: int = 35,
    max_voxels: int = 20000,
    deterministic: bool = True,
) -> Union[Tensor, Tuple[Tensor, Tensor, Tensor]]:
    """mmcv.ops.voxelization: dynamic (coors [N, 3]) when max_points or max_voxels is -1,
    else hard (voxels, coors, num_points_per_voxel). mmops is always deterministic:
    ``deterministic`` is accepted for mmcv's signature, and both values give mmcv's
    deterministic result."""
    if max_points == -1 or max_voxels == -1:
        return dynamic_voxelize(points, voxel_size, coors_range)
    return hard_voxelize(points, voxel_size, coors_range, max_points, max_voxels)


class Voxelization(torch.nn.Module):
    """mmcv.ops.Voxelization: points [N, ndim >= 3] to voxels (hard, max_num_points > 0)
    or to the voxel of every point (dynamic, max_num_points == -1). max_voxels: an int
    or (training, testing)."""

    def __init__(
        self,
        voxel_size: Sequence[float],
        point_cloud_range: Sequence[float],
        max_num_points: int,
        max_voxels: Union[int, Tuple[int, int]] = 20000,
        deterministic: bool = True,
    ):
        super().__init__()
        self.voxel_size = [float(v) for v in voxel_size]
        self.point_cloud_range = [float(v) for v in point_cloud_range]
        self.max_num_points = int(max_num_points)
        pair = tuple(max_voxels) if isinstance(max_voxels, (tuple, list)) else (max_voxels, max_voxels)
        self.max_voxels = (int(pair[0]), int(pair[1]))
        self.deterministic = deterministic
        r = torch.tensor(self.point_cloud_range, dtype=torch.float32)
        grid_size = torch.round((r[3:] - r[:3]) / torch.tensor(self.voxel_size, dtype=torch.float32)).long()
        self.grid_size = grid_size
        # [x, y] cells -> [1, y, x] (mmcv's pcd_shape)
        self.pcd_shape = [1, int(grid_size[1]), int(grid_size[0])]

    def forward(self, input: Tensor) -> Union[Tensor, Tuple[Tensor, Tensor, Tensor]]:
        max_voxels = self.max_voxels[0] if self.training else self.max_voxels[1]
        return voxelization(input, self.voxel_size, self.point_cloud_range, self.max_num_points, max_voxels)

    def extra_repr(self) -> str:
        return (
            f"voxel_size={self.voxel_size}, point_cloud_range={self.point_cloud_range}, "
            f"max_num_points={self.max_num_points}, max_voxels={self.max_voxels}, deterministic={self.deterministic}"
        )


def dynamic_scatter(feats: Tensor, coors: Tensor, reduce: str = "max") -> Tuple[Tensor, Tensor]:
    """mmcv.ops.dynamic_scatter: the features [N, C] of the points that share coordinates
    (coors [N, D] int32; rows with a negative value are dropped) reduced by "sum", "mean"
    or "max" into (voxel_feats [M, C], voxel_coors [M, D]), voxels in increasing
    lexicographic order. Max: NaN propagates; the gradient goes to the lowest-index
    point of the maximum."""
    return torch.ops.mmops.dynamic_scatter(feats, coors, reduce)


class DynamicScatter(torch.nn.Module):
    """mmcv.ops.DynamicScatter: mean (average_points) or max of the points of every voxel.
    coors [N, 3] (z, y, x) or [N, 4] (batch, z, y, x): one call for the whole batch (mmcv
    loops over the batch indices 0 .. coors[-1, 0]; the result is the same, voxels by
    batch, then (z, y, x))."""

    def __init__(self, voxel_size: Sequence[float], point_cloud_range: Sequence[float], average_points: bool):
        super().__init__()
        self.voxel_size = [float(v) for v in voxel_size]
        self.point_cloud_range = [float(v) for v in point_cloud_range]
        self.average_points = average_points

    def forward_single(self, points: Tensor, coors: Tensor) -> Tuple[Tensor, Tensor]:
        return dynamic_scatter(points, coors, "mean" if self.average_points else "max")

    def forward(self, points: Tensor, coors: Tensor) -> Tuple[Tensor, Tensor]:
        return self.forward_single(points, coors)

    def extra_repr(self) -> str:
        return (
            f"voxel_size={self.voxel_size}, point_cloud_range={self.point_cloud_range}, "
            f"average_points={self.average_points}"
        )
