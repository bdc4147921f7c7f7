"""tin_shift: the functional wrapper (mmcv.ops.tin_shift) and TINShift."""

import torch
from torch import Tensor, nn


def tin_shift(input: Tensor, shift: Tensor) -> Tensor:
    """TIN's temporal interlace shift with mmcv's forward semantics (docs/ops/tin_shift.md).

    input: [N, T, C, H * W] (mmcv's layout) or [N, T, C, H, W]; shift: [N, G] int32 or
    int64, G dividing C. Channels [g * C / G, (g + 1) * C / G) of clip n move shift[n, g]
    frames towards later frames: output[n, t, c] = input[n, t - shift[n, g], c], 0 where
    that frame is outside [0, T). Differentiable w.r.t. input (the gradient is grad_output
    moved by -shift); shift gets no gradient.
    """
    return torch.ops.mmops.tin_shift(input, shift)


class TINShift(nn.Module):
    """mmcv's TINShift(): forward(input [N, T, C, H * W], shift [N, G])."""

    def forward(self, input: Tensor, shift: Tensor) -> Tensor:
        return tin_shift(input, shift)


__all__ = ["tin_shift", "TINShift"]
