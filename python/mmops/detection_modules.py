"""nn.Modules of mmops' detection ops with mmcv's names and argument order;
all are TorchScript-scriptable."""

from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import pair as _pair

_REDUCTIONS = ("none", "mean", "sum")


class RoIPool(nn.Module):
    """mmcv.ops.RoIPool on top of torch.ops.mmops.roi_pool (torchvision semantics).

    forward(input [N, C, H, W], rois [K, 5]) -> [K, C, out_h, out_w].
    """

    def __init__(self, output_size: Union[int, Tuple[int, int], List[int]], spatial_scale: float = 1.0) -> None:
        super().__init__()
        self.output_size: List[int] = _pair(output_size)
        self.spatial_scale = float(spatial_scale)

    def forward(self, input: Tensor, rois: Tensor) -> Tensor:
        return torch.ops.mmops.roi_pool(input, rois, self.output_size, self.spatial_scale)

    def extra_repr(self) -> str:
        return f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}"


class SigmoidFocalLoss(nn.Module):
    """mmcv.ops.SigmoidFocalLoss: forward(input [N, C], target [N] int64) -> loss.

    weight (optional [C] class weights) is registered as a buffer, as in mmcv.
    """

    def __init__(self, gamma: float, alpha: float, weight: Optional[Tensor] = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"SigmoidFocalLoss: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        self.gamma = float(gamma)
        self.alpha = float(alpha)
        self.register_buffer("weight", weight)
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return torch.ops.mmops.sigmoid_focal_loss(input, target, self.gamma, self.alpha, self.weight,
                                                  self.reduction)

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, alpha={self.alpha}, reduction={self.reduction}"


class SoftmaxFocalLoss(nn.Module):
    """mmcv.ops.SoftmaxFocalLoss: forward(input [N, C], target [N] int64) -> loss.

    weight (optional [C] class weights) is registered as a buffer, as in mmcv.
    """

    def __init__(self, gamma: float, alpha: float, weight: Optional[Tensor] = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"SoftmaxFocalLoss: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        self.gamma = float(gamma)
        self.alpha = float(alpha)
        self.register_buffer("weight", weight)
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return torch.ops.mmops.softmax_focal_loss(input, target, self.gamma, self.alpha, self.weight,
                                                  self.reduction)

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, alpha={self.alpha}, reduction={self.reduction}"


__all__ = ["RoIPool", "SigmoidFocalLoss", "SoftmaxFocalLoss"]
