"""Deformable convolution: functional wrappers and mmcv's nn.Modules.

torch.ops.mmops.deform_conv2d (DCNv1) and torch.ops.mmops.modulated_deform_conv2d
(DCNv2); see docs/ops/deform_conv2d.md and docs/ops/modulated_deform_conv2d.md for
the semantics. The modules keep mmcv's names, constructor arguments, attributes
and initialisation, call the functional wrappers and are TorchScript-scriptable.
"""

import math
import warnings
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import IntPair as _IntPair
from ._utils import pair


def _geometry(stride: _IntPair, padding: _IntPair, dilation: _IntPair) -> Tuple[List[int], List[int], List[int]]:
    """stride, padding and dilation as the ops' [h, w] lists."""
    return pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")


def deform_conv2d(
    input: Tensor,
    offset: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: _IntPair = 1,
    padding: _IntPair = 0,
    dilation: _IntPair = 1,
    groups: int = 1,
    deform_groups: int = 1,
) -> Tensor:
    """Deformable convolution v1 (mmcv / torchvision semantics).

    input [N, C_in, H, W]; offset [N, 2 * deform_groups * kh * kw, H_out, W_out]
    with channel (g * kh * kw + k) * 2 + 0 = dy and + 1 = dx of tap k = i * kw + j;
    weight [C_out, C_in / groups, kh, kw]; bias [C_out] or None. Returns
    [N, C_out, H_out, W_out]. Unlike mmcv's function, bias comes fourth (as in
    the op's schema and torchvision) and there is no im2col_step.
    """
    stride_hw, padding_hw, dilation_hw = _geometry(stride, padding, dilation)
    return torch.ops.mmops.deform_conv2d(
        input, offset, weight, bias, stride_hw, padding_hw, dilation_hw, int(groups), int(deform_groups)
    )


def modulated_deform_conv2d(
    input: Tensor,
    offset: Tensor,
    mask: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: _IntPair = 1,
    padding: _IntPair = 0,
    dilation: _IntPair = 1,
    groups: int = 1,
    deform_groups: int = 1,
) -> Tensor:
    """Modulated deformable convolution (DCNv2), mmcv's argument order.

    As deform_conv2d, each sample multiplied by mask [N, deform_groups * kh * kw, H_out, W_out].
    """
    stride_hw, padding_hw, dilation_hw = _geometry(stride, padding, dilation)
    return torch.ops.mmops.modulated_deform_conv2d(
        input, offset, mask, weight, bias, stride_hw, padding_hw, dilation_hw, int(groups), int(deform_groups)
    )


def _output_hw(x: Tensor, weight: Tensor, stride: List[int], padding: List[int], dilation: List[int]) -> List[int]:
    """The convolution's output [H_out, W_out] (the op checks that it is positive)."""
    out: List[int] = []
    for d in range(2):
        extent = dilation[d] * (weight.shape[2 + d] - 1) + 1
        out.append((x.shape[2 + d] + 2 * padding[d] - extent) // stride[d] + 1)
    return out


def _leading_block(t: Tensor, channels: int, out_hw: List[int]) -> Tensor:
    """mmcv's reading of an offset / mask buffer larger than the output (DyHead passes
    one computed on a larger level): each image's buffer, flattened, is read from its
    start as [channels, H_out, W_out]. A buffer of the exact size (or a smaller one,
    which the op rejects) is returned as it is."""
    h_out, w_out = out_hw[0], out_hw[1]
    if t.dim() != 4 or (t.shape[2] == h_out and t.shape[3] == w_out):
        return t
    needed = channels * h_out * w_out
    per_image = t.shape[1] * t.shape[2] * t.shape[3]
    if h_out <= 0 or w_out <= 0 or per_image < needed:
        return t
    flat = t.contiguous().reshape(t.shape[0], per_image)
    return flat[:, :needed].reshape(t.shape[0], channels, h_out, w_out)


def _deform_groups_alias(cls: str, deform_groups: int, deformable_groups: Optional[int]) -> int:
    """mmcv's modules still take the old name `deformable_groups=` (with a warning)."""
    if deformable_groups is None:
        return deform_groups
    if deform_groups != 1 and deform_groups != deformable_groups:
        raise ValueError(
            f"{cls}: deform_groups={deform_groups} and its old name deformable_groups={deformable_groups} disagree"
        )
    warnings.warn(f"{cls}: deformable_groups is deprecated, use deform_groups", DeprecationWarning, stacklevel=3)
    return deformable_groups


def _check_channels(cls: str, in_channels: int, out_channels: int, groups: int, deform_groups: int) -> None:
    if groups <= 0 or in_channels % groups != 0:
        raise ValueError(f"{cls}: in_channels {in_channels} is not divisible by groups {groups}")
    if out_channels % groups != 0:
        raise ValueError(f"{cls}: out_channels {out_channels} is not divisible by groups {groups}")
    if deform_groups <= 0 or in_channels % deform_groups != 0:
        raise ValueError(f"{cls}: in_channels {in_channels} is not divisible by deform_groups {deform_groups}")


def _init_conv_geometry(
    module: nn.Module,
    in_channels: int,
    out_channels: int,
    kernel_size: _IntPair,
    stride: _IntPair,
    padding: _IntPair,
    dilation: _IntPair,
    groups: int,
    deform_groups: int,
) -> None:
    """The attributes (nn.Conv2d's names) and the weight parameter shared by the modules."""
    _check_channels(type(module).__name__, in_channels, out_channels, groups, deform_groups)
    module.in_channels = in_channels
    module.out_channels = out_channels
    # tuples, as mmcv's (and nn.Conv2d's) attributes
    module.kernel_size = tuple(pair(kernel_size, "kernel_size"))
    module.stride = tuple(pair(stride, "stride"))
    module.padding = tuple(pair(padding, "padding"))
    module.dilation = tuple(pair(dilation, "dilation"))
    module.groups = groups
    module.deform_groups = deform_groups
    # compatibility with nn.Conv2d
    module.transposed = False
    module.output_padding = (0,)
    module.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, *module.kernel_size))


def _conv_offset(module: nn.Module, maps_per_tap: int) -> nn.Conv2d:
    """The Pack modules' offset (and mask) predictor: a Conv2d with the module's geometry
    and maps_per_tap output maps per deform group and kernel tap."""
    return nn.Conv2d(
        module.in_channels,
        module.deform_groups * maps_per_tap * module.kernel_size[0] * module.kernel_size[1],
        kernel_size=module.kernel_size,
        stride=module.stride,
        padding=module.padding,
        dilation=module.dilation,
        bias=True,
    )


def _rename_legacy_offset_keys(state_dict, prefix: str, local_metadata) -> None:
    """mmcv's Pack modules before version 2 stored conv_offset as `<name>_offset.*`."""
    version = local_metadata.get("version", None)
    if version is None or version < 2:
        for suffix in ("weight", "bias"):
            new, old = f"{prefix}conv_offset.{suffix}", f"{prefix[:-1]}_offset.{suffix}"
            if new not in state_dict and old in state_dict:
                state_dict[new] = state_dict.pop(old)


class DeformConv2d(nn.Module):
    """mmcv.ops.DeformConv2d: deformable convolution v1, no bias.

    forward(x [N, C_in, H, W], offset [N, 2 * deform_groups * kh * kw, H_out, W_out]).
    The weight is initialised as mmcv does (kaiming uniform, relu gain). As in
    mmcv, the op runs in offset's dtype (x and weight are cast to it), which is
    what autocast needs. mmcv pads inputs smaller than the kernel before its
    CUDA kernel; mmops' op needs no padding (same result). im2col_step is
    accepted and ignored (mmops chunks the batch by memory instead).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: _IntPair,
        stride: _IntPair = 1,
        padding: _IntPair = 0,
        dilation: _IntPair = 1,
        groups: int = 1,
        deform_groups: int = 1,
        bias: bool = False,
        im2col_step: int = 32,
        deformable_groups: Optional[int] = None,
    ) -> None:
        super().__init__()
        deform_groups = _deform_groups_alias(type(self).__name__, deform_groups, deformable_groups)
        if bias:
            raise ValueError(f"DeformConv2d: bias={bias} is not supported (as in mmcv)")
        _init_conv_geometry(
            self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, deform_groups
        )
        self.im2col_step = im2col_step
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.weight, nonlinearity="relu")

    def _deform(self, x: Tensor, offset: Tensor) -> Tensor:
        return deform_conv2d(
            x.to(offset.dtype),
            offset,
            self.weight.to(offset.dtype),
            None,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            self.deform_groups,
        )

    def forward(self, x: Tensor, offset: Tensor) -> Tensor:
        return self._deform(x, offset)

    def extra_repr(self) -> str:
        return (
            f"in_channels={self.in_channels}, out_channels={self.out_channels}, "
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, groups={self.groups}, deform_groups={self.deform_groups}, bias=False"
        )


class DeformConv2dPack(DeformConv2d):
    """mmcv.ops.DeformConv2dPack (mmcv's "DCN"): DeformConv2d whose offsets come
    from its own conv_offset (a Conv2d with the same geometry, zero-initialised,
    so it starts as a plain convolution). forward(x)."""

    _version = 2

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.conv_offset = _conv_offset(self, 2)  # (dy, dx) per tap
        self.init_offset()

    def init_offset(self) -> None:
        nn.init.zeros_(self.conv_offset.weight)
        nn.init.zeros_(self.conv_offset.bias)

    def forward(self, x: Tensor) -> Tensor:  # type: ignore[override]
        return self._deform(x, self.conv_offset(x))

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        _rename_legacy_offset_keys(state_dict, prefix, local_metadata)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )


class ModulatedDeformConv2d(nn.Module):
    """mmcv.ops.ModulatedDeformConv2d: modulated deformable convolution (DCNv2).

    forward(x, offset [N, 2 * deform_groups * kh * kw, H_out, W_out],
    mask [N, deform_groups * kh * kw, H_out, W_out]). As mmcv's, it also takes
    an offset / mask larger than the output, of which it reads the leading
    [C, H_out, W_out] block of each image's flattened buffer (DyHead relies on
    it). Initialised as mmcv:
    weight uniform in +-1/sqrt(in_channels * kh * kw), bias zero. As in mmcv,
    the op runs in offset's dtype (x, mask, weight and bias are cast to it).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: _IntPair,
        stride: _IntPair = 1,
        padding: _IntPair = 0,
        dilation: _IntPair = 1,
        groups: int = 1,
        deform_groups: int = 1,
        bias: Union[bool, str] = True,
        deformable_groups: Optional[int] = None,
    ) -> None:
        super().__init__()
        deform_groups = _deform_groups_alias(type(self).__name__, deform_groups, deformable_groups)
        _init_conv_geometry(
            self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, deform_groups
        )
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.init_weights()

    def init_weights(self) -> None:
        n = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
        stdv = 1.0 / math.sqrt(n)
        with torch.no_grad():
            self.weight.uniform_(-stdv, stdv)
            if self.bias is not None:
                self.bias.zero_()

    def _deform(self, x: Tensor, offset: Tensor, mask: Tensor) -> Tensor:
        dtype = offset.dtype
        bias = self.bias
        out_hw = _output_hw(x, self.weight, list(self.stride), list(self.padding), list(self.dilation))
        taps = self.deform_groups * self.kernel_size[0] * self.kernel_size[1]
        return modulated_deform_conv2d(
            x.to(dtype),
            _leading_block(offset, 2 * taps, out_hw),
            _leading_block(mask, taps, out_hw).to(dtype),
            self.weight.to(dtype),
            bias.to(dtype) if bias is not None else None,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            self.deform_groups,
        )

    def forward(self, x: Tensor, offset: Tensor, mask: Tensor) -> Tensor:
        return self._deform(x, offset, mask)

    def extra_repr(self) -> str:
        return (
            f"in_channels={self.in_channels}, out_channels={self.out_channels}, "
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, groups={self.groups}, deform_groups={self.deform_groups}, "
            f"bias={self.bias is not None}"
        )


class ModulatedDeformConv2dPack(ModulatedDeformConv2d):
    """mmcv.ops.ModulatedDeformConv2dPack (mmcv's "DCNv2"): offsets and mask from
    its own conv_offset (3 * deform_groups * kh * kw channels, zero-initialised):
    out = conv_offset(x); o1, o2, m = chunk(out, 3, dim=1); offset = cat(o1, o2);
    mask = sigmoid(m). forward(x)."""

    _version = 2

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.conv_offset = _conv_offset(self, 3)  # (dy, dx, mask) per tap
        self.init_weights()

    def init_weights(self) -> None:
        super().init_weights()
        if hasattr(self, "conv_offset"):
            nn.init.zeros_(self.conv_offset.weight)
            nn.init.zeros_(self.conv_offset.bias)

    def forward(self, x: Tensor) -> Tensor:  # type: ignore[override]
        out = self.conv_offset(x)
        o1, o2, mask = torch.chunk(out, 3, dim=1)
        offset = torch.cat((o1, o2), dim=1)
        return self._deform(x, offset, torch.sigmoid(mask))

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        _rename_legacy_offset_keys(state_dict, prefix, local_metadata)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )


__all__ = [
    "deform_conv2d",
    "modulated_deform_conv2d",
    "DeformConv2d",
    "DeformConv2dPack",
    "ModulatedDeformConv2d",
    "ModulatedDeformConv2dPack",
]
