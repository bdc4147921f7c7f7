"""deform_roi_pool: the functional wrapper and mmcv's DeformRoIPool, DeformRoIPoolPack and
ModulatedDeformRoIPoolPack modules (TorchScript-scriptable, mmcv's layer names)."""

from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import pair


def deform_roi_pool(
    input: Tensor,
    rois: Tensor,
    offset: Optional[Tensor] = None,
    output_size: Optional[Union[int, Tuple[int, int], List[int]]] = None,
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    gamma: float = 0.1,
) -> Tensor:
    """mmcv's deform_roi_pool (see docs/ops/deform_roi_pool.md), in mmcv's argument order.

    input: [N, C, H, W]; rois: [K, 5] (batch_index, x1, y1, x2, y2); offset:
    [K, 2, out_h, out_w] (x, y shifts in units of gamma * roi size) or None.
    Returns [K, C, out_h, out_w]: the mean of each bin's bilinear samples.
    Differentiable w.r.t. input and offset.
    """
    if output_size is None:
        raise ValueError("mmops.deform_roi_pool: output_size is required")
    return torch.ops.mmops.deform_roi_pool(
        input, rois, offset, pair(output_size), float(spatial_scale), int(sampling_ratio), float(gamma)
    )


class DeformRoIPool(nn.Module):
    """mmcv.ops.DeformRoIPool: forward(input, rois, offset=None) -> [K, C, out_h, out_w]."""

    def __init__(
        self,
        output_size: Union[int, Tuple[int, int], List[int]],
        spatial_scale: float = 1.0,
        sampling_ratio: int = 0,
        gamma: float = 0.1,
    ) -> None:
        super().__init__()
        self.output_size: List[int] = pair(output_size)
        self.spatial_scale = float(spatial_scale)
        self.sampling_ratio = int(sampling_ratio)
        self.gamma = float(gamma)

    def forward(self, input: Tensor, rois: Tensor, offset: Optional[Tensor] = None) -> Tensor:
        return deform_roi_pool(
            input, rois, offset, self.output_size, self.spatial_scale, self.sampling_ratio, self.gamma
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}, gamma={self.gamma}"
        )


def _fc_stack(in_features: int, hidden: int, out_features: int, layers: int) -> nn.Sequential:
    """mmcv's Linear/ReLU stack (`layers` Linear layers); the last Linear starts at zero."""
    mods: List[nn.Module] = []
    width = in_features
    for _ in range(layers - 1):
        mods += [nn.Linear(width, hidden), nn.ReLU(inplace=True)]
        width = hidden
    last = nn.Linear(width, out_features)
    nn.init.zeros_(last.weight)
    nn.init.zeros_(last.bias)
    mods.append(last)
    return nn.Sequential(*mods)


class DeformRoIPoolPack(DeformRoIPool):
    """mmcv.ops.DeformRoIPoolPack: the offsets come from `offset_fc` on a first, unshifted pooling.

    forward(input [N, output_channels, H, W], rois [K, 5]) -> [K, C, out_h, out_w].
    offset_fc is mmcv's (Linear, ReLU, Linear, ReLU, Linear), its last layer zero at start,
    so mmcv checkpoints load as they are.
    """

    def __init__(
        self,
        output_size: Union[int, Tuple[int, int], List[int]],
        output_channels: int,
        deform_fc_channels: int = 1024,
        spatial_scale: float = 1.0,
        sampling_ratio: int = 0,
        gamma: float = 0.1,
    ) -> None:
        super().__init__(output_size, spatial_scale, sampling_ratio, gamma)
        self.output_channels = int(output_channels)
        self.deform_fc_channels = int(deform_fc_channels)
        bins = self.output_size[0] * self.output_size[1]
        self.offset_fc = _fc_stack(bins * self.output_channels, self.deform_fc_channels, bins * 2, 3)

    def _check_channels(self, input: Tensor) -> None:
        if input.size(1) != self.output_channels:
            raise ValueError(
                f"mmops.DeformRoIPoolPack: expected input with output_channels = {self.output_channels} "
                f"channels, got {input.size(1)}"
            )

    def _offset(self, input: Tensor, rois: Tensor) -> Tuple[Tensor, Tensor]:
        """(the unshifted pooling flattened per roi, the offsets [K, 2, out_h, out_w])."""
        self._check_channels(input)
        x = deform_roi_pool(input, rois, None, self.output_size, self.spatial_scale, self.sampling_ratio, self.gamma)
        flat = x.reshape(rois.size(0), -1)
        offset = self.offset_fc(flat).reshape(rois.size(0), 2, self.output_size[0], self.output_size[1])
        return flat, offset

    def forward(self, input: Tensor, rois: Tensor) -> Tensor:  # type: ignore[override]
        _, offset = self._offset(input, rois)
        return deform_roi_pool(
            input, rois, offset, self.output_size, self.spatial_scale, self.sampling_ratio, self.gamma
        )


class ModulatedDeformRoIPoolPack(DeformRoIPoolPack):
    """mmcv.ops.ModulatedDeformRoIPoolPack: DeformRoIPoolPack times a per-bin mask in (0, 1).

    mask_fc is mmcv's (Linear, ReLU, Linear, Sigmoid), its last Linear zero at start
    (mask 0.5 everywhere).
    """

    def __init__(
        self,
        output_size: Union[int, Tuple[int, int], List[int]],
        output_channels: int,
        deform_fc_channels: int = 1024,
        spatial_scale: float = 1.0,
        sampling_ratio: int = 0,
        gamma: float = 0.1,
    ) -> None:
        super().__init__(output_size, output_channels, deform_fc_channels, spatial_scale, sampling_ratio, gamma)
        bins = self.output_size[0] * self.output_size[1]
        self.mask_fc = _fc_stack(bins * self.output_channels, self.deform_fc_channels, bins, 2)
        self.mask_fc.append(nn.Sigmoid())

    def forward(self, input: Tensor, rois: Tensor) -> Tensor:  # type: ignore[override]
        flat, offset = self._offset(input, rois)
        mask = self.mask_fc(flat).reshape(rois.size(0), 1, self.output_size[0], self.output_size[1])
        pooled = deform_roi_pool(
            input, rois, offset, self.output_size, self.spatial_scale, self.sampling_ratio, self.gamma
        )
        return pooled * mask


__all__ = ["deform_roi_pool", "DeformRoIPool", "DeformRoIPoolPack", "ModulatedDeformRoIPoolPack"]
