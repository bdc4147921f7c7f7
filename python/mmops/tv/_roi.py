"""roi_align and roi_pool with torchvision's names, defaults and checks, on mmops' ops.

torchvision's `roi_align` is mmops' `roi_align` in `avg` mode with torchvision's
defaults (sampling_ratio=-1: adaptive, aligned=False); `roi_pool` has torchvision's
semantics already. The functions are torch.fx leaves (as torchvision's) and scriptable.
"""

from typing import List, Tuple, Union

import torch
import torch.fx
from torch import Tensor, nn

from .._utils import boxes_to_rois, pair

Boxes = Union[Tensor, List[Tensor]]
OutputSize = Union[int, Tuple[int, int], List[int]]


def check_roi_boxes_shape(boxes: Boxes) -> None:
    """torchvision's check (an AssertionError, as torch._assert raises): a [K, 5]
    tensor, or a list of [Ki, 4] tensors."""
    if isinstance(boxes, Tensor):
        torch._assert(boxes.size(1) == 5, "mmops.tv: the boxes tensor must have shape [K, 5]")
    else:
        for b in boxes:
            torch._assert(b.size(1) == 4, "mmops.tv: each tensor of the boxes list must have shape [Ki, 4]")


@torch.fx.wrap
def roi_align(
    input: Tensor,
    boxes: Boxes,
    output_size: OutputSize,
    spatial_scale: float = 1.0,
    sampling_ratio: int = -1,
    aligned: bool = False,
) -> Tensor:
    """torchvision.ops.roi_align: average RoIAlign of [K, 5] rois (batch index, x1, y1,
    x2, y2) or a list of per-image [Ki, 4] boxes. sampling_ratio <= 0: adaptive grid.
    Returns [K, C, out_h, out_w]."""
    check_roi_boxes_shape(boxes)
    return torch.ops.mmops.roi_align(
        input,
        boxes_to_rois(boxes),
        pair(output_size),
        float(spatial_scale),
        max(int(sampling_ratio), 0),  # mmops' adaptive grid is 0, torchvision's any value <= 0
        "avg",
        bool(aligned),
    )


@torch.fx.wrap
def roi_pool(input: Tensor, boxes: Boxes, output_size: OutputSize, spatial_scale: float = 1.0) -> Tensor:
    """torchvision.ops.roi_pool: max over whole-pixel bins of rounded boxes."""
    check_roi_boxes_shape(boxes)
    return torch.ops.mmops.roi_pool(input, boxes_to_rois(boxes), pair(output_size), float(spatial_scale))


class RoIAlign(nn.Module):
    """torchvision.ops.RoIAlign: forward(input, rois) = roi_align with these settings.
    The attributes keep the values given (repr as torchvision's)."""

    def __init__(self, output_size: OutputSize, spatial_scale: float, sampling_ratio: int, aligned: bool = False):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input: Tensor, rois: Boxes) -> Tensor:
        return roi_align(
            input, rois, self.output_size, float(self.spatial_scale), int(self.sampling_ratio), bool(self.aligned)
        )

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned})"
        )


class RoIPool(nn.Module):
    """torchvision.ops.RoIPool: forward(input, rois) = roi_pool with these settings."""

    def __init__(self, output_size: OutputSize, spatial_scale: float):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale

    def forward(self, input: Tensor, rois: Boxes) -> Tensor:
        return roi_pool(input, rois, self.output_size, float(self.spatial_scale))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale})"
