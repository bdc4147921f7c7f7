"""convex_iou and convex_giou: the mmcv-style functional wrappers around
torch.ops.mmops.convex_iou(pointsets, polygons) -> Tensor and
torch.ops.mmops.convex_giou(pointsets, polygons) -> (giou, grad), and the
ConvexGIoULoss module of Oriented RepPoints (mmrotate's name) on top of them."""

from typing import Optional, Tuple

import torch
from torch import Tensor, nn

__all__ = ["convex_iou", "convex_giou", "ConvexGIoULoss"]


def convex_iou(pointsets: Tensor, polygons: Tensor) -> Tensor:
    """mmcv.ops.convex_iou: pointsets [N, 18], polygons [K, 8] -> [N, K] IoU of each
    set's convex hull with each polygon (not differentiable)."""
    return torch.ops.mmops.convex_iou(pointsets, polygons)


def convex_giou(pointsets: Tensor, polygons: Tensor) -> Tuple[Tensor, Tensor]:
    """mmcv.ops.convex_giou: pointsets [N, 18], polygons [N, 8] -> (giou [N], grad
    [N, 18] = d giou / d pointsets). giou is differentiable w.r.t. pointsets."""
    giou, grad = torch.ops.mmops.convex_giou(pointsets, polygons)
    return giou, grad


class ConvexGIoULoss(nn.Module):
    """1 - convex_giou(pred, target), weighted and reduced ("none", "mean", "sum")
    and scaled by loss_weight, differentiable w.r.t. pred through mmops' C++
    autograd (mmrotate's ConvexGIoULoss without its invalid-gradient patching)."""

    def __init__(self, reduction: str = "mean", loss_weight: float = 1.0) -> None:
        super().__init__()
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(f"ConvexGIoULoss: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
        self.reduction = reduction
        self.loss_weight = float(loss_weight)

    def forward(self, pred: Tensor, target: Tensor, weight: Optional[Tensor] = None) -> Tensor:
        giou, _ = torch.ops.mmops.convex_giou(pred, target)
        loss = 1.0 - giou
        if weight is not None:
            loss = loss * weight
        if self.reduction == "mean":
            loss = loss.mean()
        elif self.reduction == "sum":
            loss = loss.sum()
        return loss * self.loss_weight
