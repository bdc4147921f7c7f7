"""roi_align and multi_level_roi_align: functional wrappers around torch.ops.mmops
and the nn.Modules with mmcv's names and argument order (TorchScript-scriptable)."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import boxes_to_rois, pair


def roi_align(
    input: Tensor,
    boxes: Union[Tensor, List[Tensor]],
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    pool_mode: str = "avg",
    aligned: bool = True,
) -> Tensor:
    """RoIAlign with mmcv semantics (see docs/ops/roi_align.md).

    input: [N, C, H, W]; boxes: [K, 5] (batch_index, x1, y1, x2, y2) or a list of
    per-image [Ki, 4] boxes (x1, y1, x2, y2) in image coordinates.
    Returns [K, C, out_h, out_w].
    """
    return torch.ops.mmops.roi_align(
        input,
        boxes_to_rois(boxes),
        pair(output_size),
        float(spatial_scale),
        int(sampling_ratio),
        pool_mode,
        bool(aligned),
    )


def multi_level_roi_align(
    features: List[Tensor],
    boxes: Union[Tensor, List[Tensor]],
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scales: List[float],
    sampling_ratio: int = 0,
    pool_mode: str = "avg",
    aligned: bool = True,
    finest_scale: int = 56,
) -> Tensor:
    """FPN RoIAlign in one launch (see docs/ops/multi_level_roi_align.md).

    Each roi goes to level floor(log2(sqrt(w * h) / finest_scale + 1e-6)),
    clamped to the levels given (mmdet's rule), and is pooled from that map.
    features: L maps [N, C, H_l, W_l]; spatial_scales: one per map.
    """
    return torch.ops.mmops.multi_level_roi_align(
        features,
        boxes_to_rois(boxes),
        pair(output_size),
        [float(s) for s in spatial_scales],
        int(sampling_ratio),
        pool_mode,
        bool(aligned),
        int(finest_scale),
    )


def _check_pool_mode(module: str, pool_mode: str) -> None:
    if pool_mode not in ("avg", "max"):
        raise ValueError(f"{module}: pool_mode must be 'avg' or 'max', got {pool_mode!r}")


class RoIAlign(nn.Module):
    """mmcv.ops.RoIAlign on top of torch.ops.mmops.roi_align.

    forward(input [N, C, H, W], rois [K, 5] or a list of per-image [Ki, 4] boxes)
    -> [K, C, out_h, out_w].
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
        _check_pool_mode("RoIAlign", pool_mode)
        self.output_size: List[int] = pair(output_size)
        self.spatial_scale = float(spatial_scale)
        self.sampling_ratio = int(sampling_ratio)
        self.pool_mode = pool_mode
        self.aligned = bool(aligned)

    def forward(self, input: Tensor, rois: Union[Tensor, List[Tensor]]) -> Tensor:
        return roi_align(
            input, rois, self.output_size, self.spatial_scale, self.sampling_ratio, self.pool_mode, self.aligned
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}, pool_mode={self.pool_mode!r}, aligned={self.aligned}"
        )


class MultiLevelRoIAlign(nn.Module):
    """FPN RoI feature extraction in one op, like mmdet's SingleRoIExtractor with RoIAlign.

    forward(feats: list of L maps [N, C, H_l, W_l], rois [K, 5] or a list of
    per-image [Ki, 4] boxes) -> [K, C, out_h, out_w].
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
        _check_pool_mode("MultiLevelRoIAlign", pool_mode)
        self.output_size: List[int] = pair(output_size)
        self.featmap_strides: List[int] = [int(s) for s in featmap_strides]
        self.spatial_scales: List[float] = [1.0 / s for s in self.featmap_strides]
        self.sampling_ratio = int(sampling_ratio)
        self.pool_mode = pool_mode
        self.aligned = bool(aligned)
        self.finest_scale = int(finest_scale)

    def forward(self, feats: List[Tensor], rois: Union[Tensor, List[Tensor]]) -> Tensor:
        return multi_level_roi_align(
            feats,
            rois,
            self.output_size,
            self.spatial_scales,
            self.sampling_ratio,
            self.pool_mode,
            self.aligned,
            self.finest_scale,
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={tuple(self.output_size)}, featmap_strides={self.featmap_strides}, "
            f"sampling_ratio={self.sampling_ratio}, pool_mode={self.pool_mode!r}, "
            f"aligned={self.aligned}, finest_scale={self.finest_scale}"
        )


__all__ = ["roi_align", "RoIAlign", "multi_level_roi_align", "MultiLevelRoIAlign"]
