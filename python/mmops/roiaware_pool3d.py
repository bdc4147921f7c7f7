"""roiaware_pool3d: the functional wrapper and mmcv's RoIAwarePool3d module
(TorchScript-scriptable) around torch.ops.mmops.roiaware_pool3d."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

__all__ = ["roiaware_pool3d", "RoIAwarePool3d"]


def _triple(out_size: Union[int, Tuple[int, int, int], List[int]]) -> List[int]:
    """[out_x, out_y, out_z] from an int or three ints (refined per type for TorchScript, as pair())."""
    if isinstance(out_size, int):
        return [out_size, out_size, out_size]
    if isinstance(out_size, list):
        sizes = [int(s) for s in out_size]
    else:
        sizes = [int(s) for s in out_size]
    if len(sizes) != 3:
        raise ValueError(f"mmops: out_size must be an int or 3 ints, got {sizes}")
    return sizes


def roiaware_pool3d(
    rois: Tensor,
    pts: Tensor,
    pts_feature: Tensor,
    out_size: Union[int, Tuple[int, int, int], List[int]],
    max_pts_per_voxel: int = 128,
    mode: str = "max",
) -> Tensor:
    """mmcv's RoIAwarePool3dFunction: rois [N, 7] (bottom-centre LiDAR boxes), pts [P, 3],
    pts_feature [P, C] -> [N, out_x, out_y, out_z, C], the max ("max") or mean ("avg") of the
    first max_pts_per_voxel - 1 points of each voxel (docs/ops/roiaware_pool3d.md).
    Differentiable w.r.t. pts_feature."""
    return torch.ops.mmops.roiaware_pool3d(rois, pts, pts_feature, _triple(out_size), int(max_pts_per_voxel), mode)


class RoIAwarePool3d(nn.Module):
    """mmcv.ops.RoIAwarePool3d: forward(rois [N, 7], pts [P, 3], pts_feature [P, C])
    -> [N, out_x, out_y, out_z, C]."""

    def __init__(
        self, out_size: Union[int, Tuple[int, int, int], List[int]], max_pts_per_voxel: int = 128, mode: str = "max"
    ) -> None:
        super().__init__()
        if mode not in ("max", "avg"):
            raise ValueError(f'mode must be "max" or "avg", but got "{mode}"')
        self.out_size: List[int] = _triple(out_size)
        self.max_pts_per_voxel = int(max_pts_per_voxel)
        self.mode = mode

    def forward(self, rois: Tensor, pts: Tensor, pts_feature: Tensor) -> Tensor:
        return roiaware_pool3d(rois, pts, pts_feature, self.out_size, self.max_pts_per_voxel, self.mode)

    def extra_repr(self) -> str:
        return f"out_size={tuple(self.out_size)}, max_pts_per_voxel={self.max_pts_per_voxel}, mode={self.mode}"
