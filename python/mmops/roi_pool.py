"""roi_pool: the functional wrapper and mmcv's RoIPool module (TorchScript-scriptable)."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import boxes_to_rois, pair


def roi_pool(
    input: Tensor,
    boxes: Union[Tensor, List[Tensor]],
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
) -> Tensor:
    """RoIPool with torchvision semantics (see docs/ops/roi_pool.md).

    input: [N, C, H, W]; boxes: [K, 5] (batch_index, x1, y1, x2, y2) or a list of
    per-image [Ki, 4] boxes in image coordinates. Returns [K, C, out_h, out_w]:
    the max of each bin (box corners scaled and rounded, bins quantised to whole
    pixels; an empty bin gives 0). Differentiable w.r.t. input.
    """
    return torch.ops.mmops.roi_pool(input, boxes_to_rois(boxes), pair(output_size), float(spatial_scale))


class RoIPool(nn.Module):
    """mmcv.ops.RoIPool on top of torch.ops.mmops.roi_pool (torchvision semantics).

    forward(input [N, C, H, W], rois [K, 5] or a list of per-image [Ki, 4] boxes)
    -> [K, C, out_h, out_w].
    """

    def __init__(self, output_size: Union[int, Tuple[int, int], List[int]], spatial_scale: float = 1.0) -> None:
        super().__init__()
        self.output_size: List[int] = pair(output_size)
        self.spatial_scale = float(spatial_scale)

    def forward(self, input: Tensor, rois: Union[Tensor, List[Tensor]]) -> Tensor:
        return roi_pool(input, rois, self.output_size, self.spatial_scale)

    def extra_repr(self) -> str:
        return f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}"


__all__ = ["roi_pool", "RoIPool"]
