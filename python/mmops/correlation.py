"""correlation: the functional wrapper and Correlation (mmcv.ops.Correlation)."""

import torch
from torch import Tensor, nn

from ._utils import IntPair, pair


def correlation(
    input1: Tensor,
    input2: Tensor,
    kernel_size: IntPair = 1,
    max_displacement: int = 1,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    dilation_patch: IntPair = 1,
) -> Tensor:
    """The FlowNet / PWC-Net cost volume with mmcv's semantics (docs/ops/correlation.md).

    input1, input2: [N, C, H, W]. Returns [N, P, P, oH, oW], P = 2 * max_displacement + 1,
    oH = (H + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1: for every
    displacement (dy, dx) = ((ph, pw) - max_displacement) * dilation_patch, the sum over
    the kernel taps and channels of input1 * input2 shifted by (dy, dx), zero outside the
    map, without normalisation. Differentiable w.r.t. input1 and input2.
    """
    return torch.ops.mmops.correlation(
        input1,
        input2,
        pair(kernel_size, "kernel_size"),
        int(max_displacement),
        pair(stride, "stride"),
        pair(padding, "padding"),
        pair(dilation, "dilation"),
        pair(dilation_patch, "dilation_patch"),
    )


class Correlation(nn.Module):
    """mmcv's Correlation(kernel_size, max_displacement, stride, padding, dilation,
    dilation_patch): forward(input1, input2)."""

    def __init__(
        self,
        kernel_size: int = 1,
        max_displacement: int = 1,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        dilation_patch: int = 1,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.max_displacement = max_displacement
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.dilation_patch = dilation_patch

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return correlation(
            input1,
            input2,
            self.kernel_size,
            self.max_displacement,
            self.stride,
            self.padding,
            self.dilation,
            self.dilation_patch,
        )

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(kernel_size={self.kernel_size}, max_displacement={self.max_displacement}, "
            f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
            f"dilation_patch={self.dilation_patch})"
        )


__all__ = ["correlation", "Correlation"]
