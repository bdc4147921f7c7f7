"""ps_roi: position-sensitive RoI pooling (R-FCN, Light-Head R-CNN) with torchvision's semantics.

The functional wrappers ps_roi_align / ps_roi_pool and the modules PSRoIAlign / PSRoIPool
(TorchScript-scriptable), as torchvision.ops names them.
"""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import boxes_to_rois, pair


def ps_roi_align(
    input: Tensor,
    boxes: Union[Tensor, List[Tensor]],
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
    sampling_ratio: int = -1,
) -> Tensor:
    """Position-sensitive RoIAlign, as torchvision.ops.ps_roi_align (docs/ops/ps_roi_align.md).

    input: [N, C, H, W] with C = C_out * out_h * out_w; boxes: [K, 5] (batch_index, x1, y1,
    x2, y2) or a list of per-image [Ki, 4] boxes in image coordinates. Returns
    [K, C_out, out_h, out_w]: bin (i, j) of output channel c averages bilinear samples of
    input channel (c * out_h + i) * out_w + j (corners scaled, minus 0.5; sampling_ratio <= 0:
    ceil(roi size / output size) samples per bin side). Differentiable w.r.t. input.
    """
    return torch.ops.mmops.ps_roi_align(
        input, boxes_to_rois(boxes), pair(output_size), float(spatial_scale), int(sampling_ratio)
    )


def ps_roi_pool(
    input: Tensor,
    boxes: Union[Tensor, List[Tensor]],
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
) -> Tensor:
    """Position-sensitive RoIPool, as torchvision.ops.ps_roi_pool (docs/ops/ps_roi_pool.md).

    Shapes as ps_roi_align. Bin (i, j) of output channel c is the mean of input channel
    (c * out_h + i) * out_w + j over the bin's pixels (corners scaled and rounded, bins
    quantised to whole pixels; an empty bin gives 0). Differentiable w.r.t. input.
    """
    return torch.ops.mmops.ps_roi_pool(input, boxes_to_rois(boxes), pair(output_size), float(spatial_scale))


class PSRoIAlign(nn.Module):
    """torchvision.ops.PSRoIAlign on top of torch.ops.mmops.ps_roi_align.

    forward(input [N, C, H, W], rois [K, 5] or a list of per-image [Ki, 4] boxes)
    -> [K, C / (out_h * out_w), out_h, out_w].
    """

    def __init__(
        self,
        output_size: Union[int, Tuple[int, int], List[int]],
        spatial_scale: float = 1.0,
        sampling_ratio: int = -1,
    ) -> None:
        super().__init__()
        self.output_size: List[int] = pair(output_size)
        self.spatial_scale = float(spatial_scale)
        self.sampling_ratio = int(sampling_ratio)

    def forward(self, input: Tensor, rois: Union[Tensor, List[Tensor]]) -> Tensor:
        return ps_roi_align(input, rois, self.output_size, self.spatial_scale, self.sampling_ratio)

    def extra_repr(self) -> str:
        return (
            f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}"
        )


class PSRoIPool(nn.Module):
    """torchvision.ops.PSRoIPool on top of torch.ops.mmops.ps_roi_pool.

    forward(input [N, C, H, W], rois [K, 5] or a list of per-image [Ki, 4] boxes)
    -> [K, C / (out_h * out_w), out_h, out_w].
    """

    def __init__(self, output_size: Union[int, Tuple[int, int], List[int]], spatial_scale: float = 1.0) -> None:
        super().__init__()
        self.output_size: List[int] = pair(output_size)
        self.spatial_scale = float(spatial_scale)

    def forward(self, input: Tensor, rois: Union[Tensor, List[Tensor]]) -> Tensor:
        return ps_roi_pool(input, rois, self.output_size, self.spatial_scale)

    def extra_repr(self) -> str:
        return f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}"


__all__ = ["ps_roi_align", "ps_roi_pool", "PSRoIAlign", "PSRoIPool"]
