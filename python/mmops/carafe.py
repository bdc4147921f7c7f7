"""carafe: the functional wrappers and mmcv's CARAFE, CARAFENaive and CARAFEPack modules
(TorchScript-scriptable; CARAFEPack has mmcv's layers and parameter names, so mmcv
checkpoints load)."""

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def carafe(features: Tensor, masks: Tensor, kernel_size: int, group_size: int, scale_factor: int) -> Tensor:
    """CARAFE reassembly with mmcv's semantics (see docs/ops/carafe.md).

    features: [N, C, H, W]; masks: [N, kernel_size**2 * group_size, H * scale_factor,
    W * scale_factor], normalised by the caller. Returns [N, C, H * scale_factor,
    W * scale_factor]: each output pixel is the mask-weighted sum of the kernel_size x
    kernel_size window (zero padded) around its source pixel, in its channel's group.
    Differentiable w.r.t. features and masks.
    """
    return torch.ops.mmops.carafe(features, masks, int(kernel_size), int(group_size), int(scale_factor))


def carafe_naive(features: Tensor, masks: Tensor, kernel_size: int, group_size: int, scale_factor: int) -> Tensor:
    """mmcv's carafe_naive: the same op as carafe (mmcv's two kernels compute the same values)."""
    return carafe(features, masks, kernel_size, group_size, scale_factor)


class CARAFE(nn.Module):
    """mmcv.ops.CARAFE: forward(features, masks) -> carafe(features, masks, ...)."""

    def __init__(self, kernel_size: int, group_size: int, scale_factor: int) -> None:
        super().__init__()
        if not all(isinstance(v, int) for v in (kernel_size, group_size, scale_factor)):
            raise TypeError("mmops: CARAFE expects int kernel_size, group_size and scale_factor")
        self.kernel_size = kernel_size
        self.group_size = group_size
        self.scale_factor = scale_factor

    def forward(self, features: Tensor, masks: Tensor) -> Tensor:
        return carafe(features, masks, self.kernel_size, self.group_size, self.scale_factor)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, group_size={self.group_size}, scale_factor={self.scale_factor}"


class CARAFENaive(CARAFE):
    """mmcv.ops.CARAFENaive: the same op as CARAFE."""


def _xavier_uniform(module: nn.Conv2d) -> None:
    # mmengine's xavier_init(m, distribution="uniform"): gain 1, bias 0
    nn.init.xavier_uniform_(module.weight, gain=1.0)
    if module.bias is not None:
        nn.init.constant_(module.bias, 0.0)


def _normal(module: nn.Conv2d, std: float) -> None:
    # mmengine's normal_init(m, std=std): mean 0, bias 0
    nn.init.normal_(module.weight, 0.0, std)
    if module.bias is not None:
        nn.init.constant_(module.bias, 0.0)


class CARAFEPack(nn.Module):
    """mmcv.ops.CARAFEPack: channel compressor (1x1 conv), content encoder (conv giving
    up_kernel**2 * up_group * scale_factor**2 channels), pixel shuffle and a softmax over each
    kernel's taps, then carafe. forward(x [N, C, H, W]) -> [N, C, H * s, W * s]."""

    def __init__(
        self,
        channels: int,
        scale_factor: int,
        up_kernel: int = 5,
        up_group: int = 1,
        encoder_kernel: int = 3,
        encoder_dilation: int = 1,
        compressed_channels: int = 64,
    ) -> None:
        super().__init__()
        self.channels = channels
        self.scale_factor = scale_factor
        self.up_kernel = up_kernel
        self.up_group = up_group
        self.encoder_kernel = encoder_kernel
        self.encoder_dilation = encoder_dilation
        self.compressed_channels = compressed_channels
        self.channel_compressor = nn.Conv2d(channels, self.compressed_channels, 1)
        self.content_encoder = nn.Conv2d(
            self.compressed_channels,
            self.up_kernel * self.up_kernel * self.up_group * self.scale_factor * self.scale_factor,
            self.encoder_kernel,
            padding=int((self.encoder_kernel - 1) * self.encoder_dilation / 2),
            dilation=self.encoder_dilation,
            groups=1,
        )
        self.init_weights()

    def init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                _xavier_uniform(m)
        _normal(self.content_encoder, std=0.001)

    def kernel_normalizer(self, mask: Tensor) -> Tensor:
        mask = F.pixel_shuffle(mask, self.scale_factor)
        n, mask_c, h, w = mask.size()
        mask_channel = mask_c // (self.up_kernel * self.up_kernel)
        mask = mask.view(n, mask_channel, -1, h, w)
        mask = F.softmax(mask, dim=2, dtype=mask.dtype)
        return mask.view(n, mask_c, h, w).contiguous()

    def feature_reassemble(self, x: Tensor, mask: Tensor) -> Tensor:
        return carafe(x, mask, self.up_kernel, self.up_group, self.scale_factor)

    def forward(self, x: Tensor) -> Tensor:
        compressed_x = self.channel_compressor(x)
        mask = self.content_encoder(compressed_x)
        mask = self.kernel_normalizer(mask)
        return self.feature_reassemble(x, mask)


__all__ = ["carafe", "carafe_naive", "CARAFE", "CARAFENaive", "CARAFEPack"]
