"""prroi_pool: the functional wrapper and mmcv's PrRoIPool module (TorchScript-scriptable)."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import boxes_to_rois, pair


def prroi_pool(
    input: Tensor,
    rois: Union[Tensor, List[Tensor]],
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
) -> Tensor:
    """Precise RoI Pooling with mmcv semantics (see docs/ops/prroi_pool.md).

    input: [N, C, H, W]; rois: [K, 5] (batch_index, x1, y1, x2, y2) or a list of
    per-image [Ki, 4] boxes in image coordinates. Returns [K, C, out_h, out_w]: the
    exact mean of the bilinearly interpolated map over each bin. Differentiable
    w.r.t. input and the roi coordinates.
    """
    return torch.ops.mmops.prroi_pool(input, boxes_to_rois(rois), pair(output_size), float(spatial_scale))


class PrRoIPool(nn.Module):
    """mmcv.ops.PrRoIPool on top of torch.ops.mmops.prroi_pool.

    forward(features [N, C, H, W], rois [K, 5] or a list of per-image [Ki, 4] boxes)
    -> [K, C, out_h, out_w].
    """

    def __init__(self, output_size: Union[int, Tuple[int, int], List[int]], spatial_scale: float = 1.0) -> None:
        super().__init__()
        self.output_size: List[int] = pair(output_size)
        self.spatial_scale = float(spatial_scale)

    def forward(self, features: Tensor, rois: Union[Tensor, List[Tensor]]) -> Tensor:
        return prroi_pool(features, rois, self.output_size, self.spatial_scale)

    def extra_repr(self) -> str:
        return f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}"


__all__ = ["prroi_pool", "PrRoIPool"]
