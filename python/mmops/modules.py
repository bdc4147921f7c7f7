"""nn.Modules with mmcv's names and argument order; all are TorchScript-scriptable."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from .ops import _pair


class RoIAlign(nn.Module):
    """mmcv.ops.RoIAlign on top of torch.ops.mmops.roi_align.

    forward(input [N, C, H, W], rois [K, 5]) -> [K, C, out_h, out_w].
    mmcv's use_torchvision flag is not offered: mmops has its own kernels.
    """

    def __init__(
        self,
        output_size: Union[int, Tuple[int, int], List[int]],
        spatial_scale: float = 1.0,
        sampling_ratio: int = 0,
        pool_mode: str = "avg",
        aligned: bool = True,
    ) -> None:
        super().__init__()
        if pool_mode not in ("avg", "max"):
            raise ValueError(f"RoIAlign: pool_mode must be 'avg' or 'max', got {pool_mode!r}")
        self.output_size: List[int] = _pair(output_size)
        self.spatial_scale = float(spatial_scale)
        self.sampling_ratio = int(sampling_ratio)
        self.pool_mode = pool_mode
        self.aligned = bool(aligned)

    def forward(self, input: Tensor, rois: Tensor) -> Tensor:
        return torch.ops.mmops.roi_align(
            input, rois, self.output_size, self.spatial_scale, self.sampling_ratio,
            self.pool_mode, self.aligned
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={tuple(self.output_size)}, spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}, pool_mode={self.pool_mode!r}, aligned={self.aligned}"
        )
