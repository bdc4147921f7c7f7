"""roi_align_rotated: the functional wrapper and mmcv's RoIAlignRotated module (TorchScript-scriptable)."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import pair


def roi_align_rotated(
    input: Tensor,
    rois: Tensor,
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    aligned: bool = True,
    clockwise: bool = False,
) -> Tensor:
    """Rotated RoIAlign with mmcv semantics (see docs/ops/roi_align_rotated.md).

    input: [N, C, H, W]; rois: [K, 6] (batch_index, cx, cy, w, h, theta in radians) in
    image coordinates. Returns [K, C, out_h, out_w]: each bin averages bilinear samples
    on a regular grid of the box rotated by theta about its centre (sampling_ratio 0:
    ceil(side / out side) per bin side). aligned shifts the centre by -0.5 pixel,
    clockwise negates theta. Differentiable w.r.t. input.
    """
    return torch.ops.mmops.roi_align_rotated(
        input, rois, pair(output_size), float(spatial_scale), int(sampling_ratio), bool(aligned), bool(clockwise)
    )


class RoIAlignRotated(nn.Module):
    """mmcv.ops.RoIAlignRotated on top of torch.ops.mmops.roi_align_rotated.

    forward(input [N, C, H, W], rois [K, 6]) -> [K, C, out_h, out_w].
    """

    def __init__(
        self,
        output_size: Union[int, Tuple[int, int], List[int]],
        spatial_scale: float = 1.0,
        sampling_ratio: int = 0,
        aligned: bool = True,
        clockwise: bool = False,
    ) -> None:
        super().__init__()
        self.output_size: List[int] = pair(output_size)
        self.spatial_scale = float(spatial_scale)
        self.sampling_ratio = int(sampling_ratio)
        self.aligned = bool(aligned)
        self.clockwise = bool(clockwise)

    def forward(self, input: Tensor, rois: Tensor) -> Tensor:
        return torch.ops.mmops.roi_align_rotated(
            input, rois, self.output_size, self.spatial_scale, self.sampling_ratio, self.aligned, self.clockwise
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned}, clockwise={self.clockwise}"
        )


__all__ = ["roi_align_rotated", "RoIAlignRotated"]
