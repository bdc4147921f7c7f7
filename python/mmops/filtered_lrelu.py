"""filtered_lrelu: the functional wrapper (mmcv.ops.filtered_lrelu) and FilteredLReLU."""

from typing import List, Optional, Union

import torch
from torch import Tensor, nn

from ._utils import fir_filter_2d, fir_padding

# TorchScript: an int or a list; eager Python takes tuples too
IntOrSeq = Union[int, List[int]]

SQRT2 = 1.4142135623730951


def filtered_lrelu(
    input: Tensor,
    filter_up: Optional[Tensor] = None,
    filter_down: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    up: int = 1,
    down: int = 1,
    padding: IntOrSeq = 0,
    gain: float = SQRT2,
    slope: float = 0.2,
    clamp: Optional[float] = None,
    flip_filter: bool = False,
    use_custom_op: bool = True,
) -> Tensor:
    """Filtered leaky ReLU of a batch of 2D images (mmcv.ops.filtered_lrelu, StyleGAN3;
    docs/ops/filtered_lrelu.md): input + bias, upsampled by up (zero insertion), padded,
    convolved with filter_up (times up ** 2), leaky ReLU (slope) times gain, clamped to
    [-clamp, clamp], convolved with filter_down and downsampled by down.

    input [N, C, H, W]; filters [fh, fw] (non-separable), [taps] (separable) or None
    (identity); bias [C] (input's dtype) or None; padding: an int, [x, y] or [x0, x1, y0,
    y1], with respect to the upsampled image (negative crops); flip_filter: False =
    convolution (mmcv's default), True = correlation; use_custom_op is accepted and
    ignored (mmops is the custom op). Differentiable w.r.t. input and bias, the gradient
    again w.r.t. the incoming gradient to any order; the filters get no gradient.
    """
    fu = fir_filter_2d(filter_up, input.device, flip_filter, float(up * up))
    fd = fir_filter_2d(filter_down, input.device, flip_filter, 1.0)
    clamp_arg: Optional[float] = None
    if clamp is not None:
        clamp_arg = float(clamp)
    return torch.ops.mmops.filtered_lrelu(
        input,
        fu,
        fd,
        bias,
        int(up),
        int(down),
        fir_padding(padding, "filtered_lrelu"),
        float(gain),
        float(slope),
        clamp_arg,
    )


class FilteredLReLU(nn.Module):
    """filtered_lrelu with fixed filters (buffers), as StyleGAN3's synthesis layers use it:
    forward(input, bias=None)."""

    def __init__(
        self,
        filter_up: Optional[Tensor] = None,
        filter_down: Optional[Tensor] = None,
        up: int = 1,
        down: int = 1,
        padding: IntOrSeq = 0,
        gain: float = SQRT2,
        slope: float = 0.2,
        clamp: Optional[float] = None,
        flip_filter: bool = False,
    ) -> None:
        super().__init__()
        # copies: the buffers never share memory with the caller's filters
        fu = None if filter_up is None else torch.as_tensor(filter_up, dtype=torch.float32).clone()
        fd = None if filter_down is None else torch.as_tensor(filter_down, dtype=torch.float32).clone()
        cpu = torch.device("cpu")
        self.register_buffer("filter_up", fir_filter_2d(fu, cpu, flip_filter, float(up * up)))
        self.register_buffer("filter_down", fir_filter_2d(fd, cpu, flip_filter, 1.0))
        self.up = int(up)
        self.down = int(down)
        self.padding = fir_padding(padding, "filtered_lrelu")
        self.gain = float(gain)
        self.slope = float(slope)
        self.clamp: Optional[float] = None if clamp is None else float(clamp)

    def forward(self, input: Tensor, bias: Optional[Tensor] = None) -> Tensor:
        return torch.ops.mmops.filtered_lrelu(
            input,
            self.filter_up,
            self.filter_down,
            bias,
            self.up,
            self.down,
            self.padding,
            self.gain,
            self.slope,
            self.clamp,
        )

    def extra_repr(self) -> str:
        return (
            f"filter_up={list(self.filter_up.shape)}, filter_down={list(self.filter_down.shape)}, up={self.up}, "
            f"down={self.down}, padding={self.padding}, gain={self.gain}, slope={self.slope}, clamp={self.clamp}"
        )


__all__ = ["filtered_lrelu", "FilteredLReLU"]
