"""deform_conv2d and DeformConv2d with torchvision's signatures, on mmops' ops.

torchvision infers the weight groups (C_in / weight.shape[1]) and the offset groups
(offset channels / (2 * kh * kw)) from the tensors; a mask selects DCNv2
(mmops' modulated_deform_conv2d), no mask DCNv1 (mmops' deform_conv2d). The offset
layout is the same in both libraries: channel 2 * (g * kh * kw + k) is dy of tap k.
"""

import math
from typing import List, Optional, Tuple, Union

import torch
import torch.fx
from torch import Tensor, nn

from .._utils import pair

IntPair = Union[int, Tuple[int, int], List[int]]


@torch.fx.wrap
def deform_conv2d(
    input: Tensor,
    offset: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: IntPair = (1, 1),
    padding: IntPair = (0, 0),
    dilation: IntPair = (1, 1),
    mask: Optional[Tensor] = None,
) -> Tensor:
    """torchvision.ops.deform_conv2d: input [N, C_in, H, W], offset [N, 2 * G * kh * kw,
    H_out, W_out], weight [C_out, C_in / groups, kh, kw], bias [C_out] or None, mask
    [N, G * kh * kw, H_out, W_out] or None. Returns [N, C_out, H_out, W_out]."""
    if input.dim() != 4 or offset.dim() != 4 or weight.dim() != 4:
        raise RuntimeError(
            f"mmops.tv.deform_conv2d: expected 4-D input, offset and weight, got shapes {list(input.shape)}, "
            f"{list(offset.shape)} and {list(weight.shape)}"
        )
    taps = weight.shape[2] * weight.shape[3]
    offset_groups = offset.shape[1] // (2 * taps) if taps > 0 else 0
    if offset_groups == 0:
        raise RuntimeError(
            f"mmops.tv.deform_conv2d: offset.shape[1] must be a positive multiple of 2 * kh * kw = {2 * taps}, "
            f"got {offset.shape[1]}"
        )
    # the op rejects groups 0 (an empty weight) with its own message
    groups = input.shape[1] // weight.shape[1] if weight.shape[1] > 0 else 0
    s, p, d = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    if mask is None:
        return torch.ops.mmops.deform_conv2d(input, offset, weight, bias, s, p, d, groups, offset_groups)
    return torch.ops.mmops.modulated_deform_conv2d(input, offset, mask, weight, bias, s, p, d, groups, offset_groups)


class DeformConv2d(nn.Module):
    """torchvision.ops.DeformConv2d: forward(input, offset, mask=None). Parameters
    `weight` [C_out, C_in / groups, kh, kw] and `bias` [C_out] (or None), initialised as
    torchvision's (kaiming uniform with a = sqrt(5); bias uniform in +-1/sqrt(fan_in))."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntPair,
        stride: IntPair = 1,
        padding: IntPair = 0,
        dilation: IntPair = 1,
        groups: int = 1,
        bias: bool = True,
    ):
        super().__init__()
        if in_channels % groups != 0:
            raise ValueError(f"mmops.tv.DeformConv2d: in_channels {in_channels} is not divisible by groups {groups}")
        if out_channels % groups != 0:
            raise ValueError(f"mmops.tv.DeformConv2d: out_channels {out_channels} is not divisible by groups {groups}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, "kernel_size")
        self.stride = _tuple(stride, "stride")
        self.padding = _tuple(padding, "padding")
        self.dilation = _tuple(dilation, "dilation")
        self.groups = groups
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, *self.kernel_size))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * self.weight.shape[2] * self.weight.shape[3]
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor, offset: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        return deform_conv2d(input, offset, self.weight, self.bias, self.stride, self.padding, self.dilation, mask=mask)

    def __repr__(self) -> str:
        s = (
            f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
            f"kernel_size={self.kernel_size}, stride={self.stride}"
        )
        s += f", padding={self.padding}" if self.padding != (0, 0) else ""
        s += f", dilation={self.dilation}" if self.dilation != (1, 1) else ""
        s += f", groups={self.groups}" if self.groups != 1 else ""
        s += ", bias=False" if self.bias is None else ""
        return s + ")"


def _tuple(value: IntPair, name: str) -> Tuple[int, int]:
    h, w = pair(value, name)
    return (h, w)
