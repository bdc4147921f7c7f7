"""bezier_align: the functional wrapper (mmcv.ops.bezier_align) and BezierAlign."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import pair


def bezier_align(
    input: Tensor,
    beziers: Tensor,
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    aligned: bool = True,
) -> Tensor:
    """ABCNet's BezierAlign with mmcv's semantics (docs/ops/bezier_align.md).

    input: [N, C, H, W]; beziers: [K, 17] (batch_index, then 8 control points x, y: the
    top cubic Bezier curve from its left end, the bottom one from its right end) in image
    coordinates. Returns [K, C, out_h, out_w]: bin (ph, pw) averages bilinear samples of a
    bin around the point at u = pw / out_w along the curves, v = ph / out_h between them.
    sampling_ratio <= 0 is adaptive. Differentiable w.r.t. input; beziers get no gradient.
    """
    return torch.ops.mmops.bezier_align(
        input, beziers, pair(output_size), float(spatial_scale), int(sampling_ratio), bool(aligned)
    )


class BezierAlign(nn.Module):
    """mmcv.ops.BezierAlign(output_size, spatial_scale, sampling_ratio, aligned=True):
    forward(input [N, C, H, W], beziers [K, 17]) -> [K, C, out_h, out_w]."""

    def __init__(
        self,
        output_size: Union[int, Tuple[int, int], List[int]],
        spatial_scale: float = 1.0,
        sampling_ratio: int = 0,
        aligned: bool = True,
    ) -> None:
        super().__init__()
        self.output_size: List[int] = pair(output_size)
        self.spatial_scale = float(spatial_scale)
        self.sampling_ratio = int(sampling_ratio)
        self.aligned = bool(aligned)

    def forward(self, input: Tensor, beziers: Tensor) -> Tensor:
        return bezier_align(input, beziers, self.output_size, self.spatial_scale, self.sampling_ratio, self.aligned)

    def extra_repr(self) -> str:
        return (
            f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned}"
        )


__all__ = ["bezier_align", "BezierAlign"]
