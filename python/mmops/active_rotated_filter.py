"""active_rotated_filter: the functional wrapper (mmcv.ops.active_rotated_filter) and a module."""

import torch
from torch import Tensor, nn


def active_rotated_filter(input: Tensor, indices: Tensor) -> Tensor:
    """Active rotating filter with mmcv's semantics (docs/ops/active_rotated_filter.md).

    input: [out_planes, in_planes, orientations, kH, kW]; indices:
    [orientations, kH, kW, rotations], integer, 1-based. Returns
    [out_planes * rotations, in_planes * orientations, kH, kW]: entry l of every
    filter copied, for rotation k, to entry indices[l, k] - 1. Differentiable w.r.t. input.
    """
    return torch.ops.mmops.active_rotated_filter(input, indices)


class ActiveRotatedFilter(nn.Module):
    """active_rotated_filter as a module: forward(input, indices)."""

    def forward(self, input: Tensor, indices: Tensor) -> Tensor:
        return active_rotated_filter(input, indices)


__all__ = ["active_rotated_filter", "ActiveRotatedFilter"]
