"""border_align: the functional wrapper (mmcv.ops.border_align) and BorderAlign."""

import torch
from torch import Tensor, nn


def border_align(input: Tensor, boxes: Tensor, pool_size: int) -> Tensor:
    """BorderDet's BorderAlign with mmcv's semantics (docs/ops/border_align.md).

    input: [N, 4C, H, W], channels [0, C), [C, 2C), [2C, 3C), [3C, 4C) the top, left,
    bottom and right border features; boxes: [N, H * W, 4] (x1, y1, x2, y2), one box per
    pixel, in input's pixels; pool_size: pool_size + 1 points are sampled along each border
    (both ends included). Returns [N, C, H * W, 4] (top, left, bottom, right): for each
    border, the maximum of its bilinearly sampled points, from its channel group.
    Differentiable w.r.t. input; boxes get no gradient.
    """
    return torch.ops.mmops.border_align(input, boxes, pool_size)


class BorderAlign(nn.Module):
    """mmcv's BorderAlign(pool_size): forward(input [N, 4C, H, W], boxes [N, H * W, 4])."""

    def __init__(self, pool_size: int) -> None:
        super().__init__()
        self.pool_size = int(pool_size)

    def forward(self, input: Tensor, boxes: Tensor) -> Tensor:
        return border_align(input, boxes, self.pool_size)

    def extra_repr(self) -> str:
        return f"pool_size={self.pool_size}"


__all__ = ["border_align", "BorderAlign"]
