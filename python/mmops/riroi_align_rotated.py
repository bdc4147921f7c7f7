"""riroi_align_rotated: the functional wrapper and mmcv's RiRoIAlignRotated module (TorchScript-scriptable)."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import pair


def riroi_align_rotated(
    features: Tensor,
    rois: Tensor,
    out_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
    num_samples: int = 0,
    num_orientations: int = 8,
    clockwise: bool = False,
) -> Tensor:
    """ReDet's rotation-invariant RoIAlign with mmcv semantics (see docs/ops/riroi_align_rotated.md).

    features: [N, C, H, W] with C = groups * num_orientations; rois: [K, 6] (batch_index,
    cx, cy, w, h, theta in radians). Returns [K, C, out_h, out_w]: rotated RoIAlign (no
    half-pixel shift, rois at least 1 x 1) whose orientation channels are shifted
    cyclically by theta * num_orientations / 2pi, blending the two nearest orientations.
    Differentiable w.r.t. features.
    """
    return torch.ops.mmops.riroi_align_rotated(
        features,
        rois,
        pair(out_size, "out_size"),
        float(spatial_scale),
        int(num_samples),
        int(num_orientations),
        bool(clockwise),
    )


class RiRoIAlignRotated(nn.Module):
    """mmcv.ops.RiRoIAlignRotated on top of torch.ops.mmops.riroi_align_rotated.

    forward(features [N, C, H, W], rois [K, 6]) -> [K, C, out_h, out_w].
    """

    def __init__(
        self,
        out_size: Union[int, Tuple[int, int], List[int]],
        spatial_scale: float = 1.0,
        num_samples: int = 0,
        num_orientations: int = 8,
        clockwise: bool = False,
    ) -> None:
        super().__init__()
        self.out_size: List[int] = pair(out_size, "out_size")
        self.spatial_scale = float(spatial_scale)
        self.num_samples = int(num_samples)
        self.num_orientations = int(num_orientations)
        self.clockwise = bool(clockwise)

    def forward(self, features: Tensor, rois: Tensor) -> Tensor:
        return torch.ops.mmops.riroi_align_rotated(
            features, rois, self.out_size, self.spatial_scale, self.num_samples, self.num_orientations, self.clockwise
        )

    def extra_repr(self) -> str:
        return (
            f"out_size={tuple(self.out_size)}, spatial_scale={self.spatial_scale}, num_samples={self.num_samples}, "
            f"num_orientations={self.num_orientations}, clockwise={self.clockwise}"
        )


__all__ = ["riroi_align_rotated", "RiRoIAlignRotated"]
