"""corner_pool: the functional wrapper and mmcv's CornerPool module."""

import torch
from torch import Tensor, nn

MODES = ("bottom", "left", "right", "top")


def corner_pool(input: Tensor, mode: str) -> Tensor:
    """CornerNet's corner pooling with mmcv's semantics (docs/ops/corner_pool.md).

    input: [N, C, H, W] floating point (any memory format; the output keeps it);
    mode: "top" (out[h] = max over h' >= h), "bottom" (h' <= h), "left" (w' >= w)
    or "right" (w' <= w). Differentiable w.r.t. input: each output's gradient goes
    to the position attaining its maximum, the nearest one on ties (torch.cummax's
    rule); NaN propagates and then takes the gradient.
    """
    return torch.ops.mmops.corner_pool(input, mode)


class CornerPool(nn.Module):
    """mmcv's CornerPool: mode "bottom", "left", "right" or "top"."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f'CornerPool: mode must be "bottom", "left", "right" or "top", but got {mode!r}')
        self.mode = mode

    def forward(self, x: Tensor) -> Tensor:
        return corner_pool(x, self.mode)

    def extra_repr(self) -> str:
        return f"mode={self.mode}"


__all__ = ["corner_pool", "CornerPool"]
