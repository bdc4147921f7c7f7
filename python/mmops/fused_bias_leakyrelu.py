"""fused_bias_leakyrelu: the functional wrapper (mmcv.ops.fused_bias_leakyrelu) and
FusedBiasLeakyReLU."""

import torch
from torch import Tensor, nn


def fused_bias_leakyrelu(input: Tensor, bias: Tensor, negative_slope: float = 0.2, scale: float = 2**0.5) -> Tensor:
    """StyleGAN2's fused bias + leaky ReLU with mmcv's semantics
    (docs/ops/fused_bias_leakyrelu.md): leaky_relu(input + bias[c], negative_slope) * scale
    for input [N, C, *] and bias [C] (cast to input's dtype, as mmcv). Differentiable w.r.t.
    input and bias to any order."""
    return torch.ops.mmops.fused_bias_leakyrelu(input, bias.to(input.dtype), float(negative_slope), float(scale))


class FusedBiasLeakyReLU(nn.Module):
    """mmcv's FusedBiasLeakyReLU(num_channels, negative_slope=0.2, scale=sqrt(2)): a learned
    bias (zeros) added before the scaled leaky ReLU."""

    def __init__(self, num_channels: int, negative_slope: float = 0.2, scale: float = 2**0.5) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(num_channels))
        self.negative_slope = float(negative_slope)
        self.scale = float(scale)

    def forward(self, input: Tensor) -> Tensor:
        return fused_bias_leakyrelu(input, self.bias, self.negative_slope, self.scale)

    def extra_repr(self) -> str:
        return f"num_channels={self.bias.numel()}, negative_slope={self.negative_slope}, scale={self.scale}"


__all__ = ["fused_bias_leakyrelu", "FusedBiasLeakyReLU"]
