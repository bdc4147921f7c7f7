"""The focal losses: functional wrappers and mmcv's SigmoidFocalLoss /
SoftmaxFocalLoss modules (TorchScript-scriptable)."""

from typing import Optional

import torch
from torch import Tensor, nn

_REDUCTIONS = ("none", "mean", "sum")


def sigmoid_focal_loss(
    input: Tensor,
    target: Tensor,
    gamma: float = 2.0,
    alpha: float = 0.25,
    weight: Optional[Tensor] = None,
    reduction: str = "mean",
) -> Tensor:
    """mmcv.ops.sigmoid_focal_loss (see docs/ops/sigmoid_focal_loss.md).

    input: [N, C] logits; target: [N] int64 class ids in [0, C] (C = background);
    weight: optional [C] class weights, row n scaled by weight[target[n]]
    (background rows by 1). reduction "none" gives [N, C]; "mean" is sum / N
    (mmcv's: divided by the number of rows, not elements); "sum".
    """
    return torch.ops.mmops.sigmoid_focal_loss(input, target, float(gamma), float(alpha), weight, reduction)


def softmax_focal_loss(
    input: Tensor,
    target: Tensor,
    gamma: float = 2.0,
    alpha: float = 0.25,
    weight: Optional[Tensor] = None,
    reduction: str = "mean",
) -> Tensor:
    """mmcv.ops.softmax_focal_loss (see docs/ops/softmax_focal_loss.md).

    Per row: -alpha * (1 - p)^gamma * log(p), p = softmax(input[n])[target[n]],
    target in [0, C); weight: optional [C] class weights, row n scaled by
    weight[target[n]]. reduction "none" gives [N]; "mean" is sum / N; "sum".
    """
    return torch.ops.mmops.softmax_focal_loss(input, target, float(gamma), float(alpha), weight, reduction)


class _FocalLoss(nn.Module):
    """The constructor and repr both focal-loss modules share (mmcv's argument order)."""

    def __init__(self, gamma: float, alpha: float, weight: Optional[Tensor] = None, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        self.gamma = float(gamma)
        self.alpha = float(alpha)
        self.register_buffer("weight", weight)
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, alpha={self.alpha}, reduction={self.reduction}"


class SigmoidFocalLoss(_FocalLoss):
    """mmcv.ops.SigmoidFocalLoss: forward(input [N, C], target [N] int64) -> loss.

    weight (optional [C] class weights) is registered as a buffer, as in mmcv.
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return sigmoid_focal_loss(input, target, self.gamma, self.alpha, self.weight, self.reduction)


class SoftmaxFocalLoss(_FocalLoss):
    """mmcv.ops.SoftmaxFocalLoss: forward(input [N, C], target [N] int64) -> loss.

    weight (optional [C] class weights) is registered as a buffer, as in mmcv.
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return softmax_focal_loss(input, target, self.gamma, self.alpha, self.weight, self.reduction)


__all__ = ["sigmoid_focal_loss", "softmax_focal_loss", "SigmoidFocalLoss", "SoftmaxFocalLoss"]
