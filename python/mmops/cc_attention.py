"""cc_attention: criss-cross attention (CCNet): ca_weight, ca_map and mmcv's CrissCrossAttention."""

from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def ca_weight(t: Tensor, f: Tensor) -> Tensor:
    """Criss-cross energies (mmcv 1.x's ``ca_weight``; docs/ops/cc_attention.md).

    t, f: [N, C, H, W] of one floating dtype, device and shape. Returns [N, H + W - 1, H, W]:
    entry k of pixel (y, x) is sum_c t[:, c, y, x] * f[:, c, p] for the criss-cross pixel
    p = (y, k) when k < W (its row; k == x is the pixel itself), else p = (j, x) with
    j = k - W when k - W < y, k - W + 1 otherwise (its column without row y).
    Differentiable w.r.t. t and f.
    """
    return torch.ops.mmops.ca_weight(t, f)


def ca_map(weight: Tensor, g: Tensor) -> Tensor:
    """Criss-cross aggregation (mmcv 1.x's ``ca_map``): weight [N, H + W - 1, H, W] (entries
    ordered as ca_weight's), g [N, C, H, W]; returns [N, C, H, W] with
    out[:, c, y, x] = sum_k weight[:, k, y, x] * g[:, c, criss-cross pixel k of (y, x)].
    Differentiable w.r.t. weight and g.
    """
    return torch.ops.mmops.ca_map(weight, g)


class _Scale(nn.Module):
    """A learnable scalar factor, as mmcv.cnn.Scale: the parameter `scale`, so state dicts match."""

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(scale, dtype=torch.float))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.scale


class CrissCrossAttention(nn.Module):
    """mmcv's CrissCrossAttention (CCNet): 1x1 query / key convolutions to in_channels // 8,
    a 1x1 value convolution, softmax over each pixel's H + W - 1 criss-cross energies, the
    values aggregated with those weights, times gamma (init 0), plus the input.

    Same parameters and state dict keys as mmcv's module (query_conv, key_conv, value_conv,
    gamma.scale), and the same result as mmcv 2.x's plain-torch forward. in_channels >= 8
    (mmcv's module fails in its first forward otherwise).
    """

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        if in_channels < 8:
            raise ValueError(
                f"CrissCrossAttention: in_channels must be >= 8 (query and key have in_channels // 8 channels), "
                f"but got {in_channels}"
            )
        self.query_conv = nn.Conv2d(in_channels, in_channels // 8, 1)
        self.key_conv = nn.Conv2d(in_channels, in_channels // 8, 1)
        self.value_conv = nn.Conv2d(in_channels, in_channels, 1)
        self.gamma = _Scale(0.0)
        self.in_channels = in_channels

    def forward(self, x: Tensor) -> Tensor:
        query = self.query_conv(x)
        key = self.key_conv(x)
        value = self.value_conv(x)
        attention = F.softmax(ca_weight(query, key), dim=1)
        out = ca_map(attention, value)
        return (self.gamma(out) + x).contiguous()

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(in_channels={self.in_channels})"


__all__: List[str] = ["ca_weight", "ca_map", "CrissCrossAttention"]
