"""upfirdn2d: the functional wrapper (mmcv.ops.upfirdn2d) and UpFirDn2d."""

from typing import List, Optional, Union

import torch
from torch import Tensor, nn

from ._utils import fir_filter_2d, fir_padding

# TorchScript: an int or a list; eager Python takes tuples too
IntOrSeq = Union[int, List[int]]


def _factors(value: IntOrSeq, name: str) -> List[int]:
    """[x, y] from an int or a pair [x, y] (mmcv's order)."""
    if isinstance(value, int):
        return [value, value]
    values = [int(v) for v in value]
    if len(values) != 2:
        raise ValueError(f"mmops.upfirdn2d: {name} must be an int or a pair [x, y], got {values}")
    return values


def upfirdn2d(
    input: Tensor,
    filter: Optional[Tensor],
    up: IntOrSeq = 1,
    down: IntOrSeq = 1,
    padding: IntOrSeq = 0,
    flip_filter: bool = False,
    gain: float = 1.0,
) -> Tensor:
    """Upsample, pad, FIR-filter and downsample a batch of 2D images (mmcv.ops.upfirdn2d,
    docs/ops/upfirdn2d.md).

    input [N, C, H, W]; filter [kh, kw] (non-separable), [taps] (separable: the same
    taps along x and y) or None (identity); up / down: an int or [x, y]; padding: an
    int, [x, y] or [x0, x1, y0, y1], with respect to the upsampled image (negative
    crops); flip_filter: False = convolution (mmcv's default), True = correlation;
    gain: scales the result. Differentiable w.r.t. input to any order; the filter
    gets no gradient.
    """
    kernel = fir_filter_2d(filter, input.device, flip_filter, gain)
    return torch.ops.mmops.upfirdn2d(
        input, kernel, _factors(up, "up"), _factors(down, "down"), fir_padding(padding, "upfirdn2d")
    )


class UpFirDn2d(nn.Module):
    """upfirdn2d with a fixed filter (a buffer): StyleGAN2's Blur, Upsample and Downsample
    are UpFirDn2d(kernel, up=2, padding=...) and the like."""

    def __init__(
        self,
        kernel: Tensor,
        up: IntOrSeq = 1,
        down: IntOrSeq = 1,
        padding: IntOrSeq = 0,
        flip_filter: bool = False,
        gain: float = 1.0,
    ) -> None:
        super().__init__()
        kernel = torch.as_tensor(kernel, dtype=torch.float32)
        if kernel.dim() == 1:
            kernel = torch.outer(kernel, kernel)
        if flip_filter:
            kernel = kernel.flip([0, 1])
        self.register_buffer("kernel", kernel * gain)
        self.up = _factors(up, "up")
        self.down = _factors(down, "down")
        self.padding = fir_padding(padding, "upfirdn2d")

    def forward(self, input: Tensor) -> Tensor:
        return upfirdn2d(input, self.kernel, self.up, self.down, self.padding)

    def extra_repr(self) -> str:
        size = list(self.kernel.shape)
        return f"kernel_size={size}, up={self.up}, down={self.down}, padding={self.padding}"


__all__ = ["upfirdn2d", "UpFirDn2d"]
