"""nn.Modules with mmcv's names and argument order; all are TorchScript-scriptable."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import pair as _pair


class RoIAlign(nn.Module):
    """mmcv.ops.RoIAlign on top of torch.ops.mmops.roi_align.

    forward(input [N, C, H, W], rois [K, 5]) -> [K, C, out_h, out_w].
    mmcv's use_torchvision flag is not offered: mmops has its own kernels.
    """

    def __init__(
        self,
        output_size: Union[int, Tuple[int, int], List[int]],
        spatial_scale: float = 1.0,
        sampling_ratio: int = 0,
        pool_mode: str = "avg",
        aligned: bool = True,
    ) -> None:
        super().__init__()
        if pool_mode not in ("avg", "max"):
            raise ValueError(f"RoIAlign: pool_mode must be 'avg' or 'max', got {pool_mode!r}")
        self.output_size: List[int] = _pair(output_size)
        self.spatial_scale = float(spatial_scale)
        self.sampling_ratio = int(sampling_ratio)
        self.pool_mode = pool_mode
        self.aligned = bool(aligned)

    def forward(self, input: Tensor, rois: Tensor) -> Tensor:
        return torch.ops.mmops.roi_align(
            input, rois, self.output_size, self.spatial_scale, self.sampling_ratio,
            self.pool_mode, self.aligned
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}, pool_mode={self.pool_mode!r}, aligned={self.aligned}"
        )


class MultiLevelRoIAlign(nn.Module):
    """FPN RoI feature extraction in one op, like mmdet's SingleRoIExtractor with RoIAlign.

    forward(feats: list of L maps [N, C, H_l, W_l], rois [K, 5]) -> [K, C, out_h, out_w].
    featmap_strides gives each map's stride (spatial scale 1 / stride).
    """

    def __init__(
        self,
        output_size: Union[int, Tuple[int, int], List[int]],
        featmap_strides: List[int],
        sampling_ratio: int = 0,
        pool_mode: str = "avg",
        aligned: bool = True,
        finest_scale: int = 56,
    ) -> None:
        super().__init__()
        if pool_mode not in ("avg", "max"):
            raise ValueError(f"MultiLevelRoIAlign: pool_mode must be 'avg' or 'max', got {pool_mode!r}")
        self.output_size: List[int] = _pair(output_size)
        self.featmap_strides: List[int] = [int(s) for s in featmap_strides]
        self.spatial_scales: List[float] = [1.0 / s for s in self.featmap_strides]
        self.sampling_ratio = int(sampling_ratio)
        self.pool_mode = pool_mode
        self.aligned = bool(aligned)
        self.finest_scale = int(finest_scale)

    def forward(self, feats: List[Tensor], rois: Tensor) -> Tensor:
        return torch.ops.mmops.multi_level_roi_align(
            feats, rois, self.output_size, self.spatial_scales, self.sampling_ratio,
            self.pool_mode, self.aligned, self.finest_scale
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={tuple(self.output_size)}, featmap_strides={self.featmap_strides}, "
            f"sampling_ratio={self.sampling_ratio}, pool_mode={self.pool_mode!r}, "
            f"aligned={self.aligned}, finest_scale={self.finest_scale}"
        )


__all__ = ["RoIAlign", "MultiLevelRoIAlign"]
