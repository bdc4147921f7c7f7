"""masked_conv2d: the functional wrapper and mmcv's MaskedConv2d module (TorchScript-scriptable).

See docs/ops/masked_conv2d.md for the semantics and the differences from mmcv.
"""

from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import IntPair as _IntPair
from ._utils import pair


def masked_conv2d(
    features: Tensor,
    mask: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    padding: _IntPair = 0,
    stride: _IntPair = 1,
) -> Tensor:
    """mmcv's masked_conv2d: the convolution where mask > 0, zero elsewhere (no bias there).

    features [N, C, H, W]; mask [N, H_out, W_out] (or, with stride 1, [N, H, W] as
    mmcv requires; any real dtype); weight [O, C, kh, kw]; bias [O] or None.
    Returns [N, O, H_out, W_out]. Differentiable w.r.t. features, weight and bias
    (mmcv's is not); unlike mmcv, any batch size and stride.
    """
    return torch.ops.mmops.masked_conv2d(features, mask, weight, bias, pair(padding, "padding"), pair(stride, "stride"))


class MaskedConv2d(nn.Conv2d):
    """mmcv.ops.MaskedConv2d: an nn.Conv2d whose forward(input, mask) computes only where
    mask > 0 (torch.ops.mmops.masked_conv2d); with mask None it is the plain convolution.

    The masked path takes the module's padding and stride (mmcv's passes only the
    padding, so a stride-2 module computes stride 1 there); dilation must be 1,
    groups 1 and padding_mode "zeros" (mmcv does not support them either).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Union[int, Tuple[int, int]],
        stride: Union[int, Tuple[int, int]] = 1,
        padding: Union[int, Tuple[int, int]] = 0,
        dilation: Union[int, Tuple[int, int]] = 1,
        groups: int = 1,
        bias: bool = True,
    ) -> None:
        if isinstance(padding, str):
            raise ValueError(f"mmops: MaskedConv2d padding must be an int or a pair, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
        self.masked_padding: List[int] = pair(padding, "padding")
        self.masked_stride: List[int] = pair(stride, "stride")

    def forward(self, input: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        if mask is None:  # the plain convolution, as mmcv's
            return self._conv_forward(input, self.weight, self.bias)
        if self.dilation != (1, 1) or self.groups != 1 or self.padding_mode != "zeros":
            raise ValueError("mmops: MaskedConv2d with a mask needs dilation 1, groups 1 and padding_mode 'zeros'")
        return torch.ops.mmops.masked_conv2d(
            input, mask, self.weight, self.bias, self.masked_padding, self.masked_stride
        )


__all__ = ["masked_conv2d", "MaskedConv2d"]
