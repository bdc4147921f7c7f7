"""three_interpolate: the mmcv-style functional wrapper around
torch.ops.mmops.three_interpolate(features, indices, weight) -> Tensor,
differentiable w.r.t. features and weight. mmcv has no module for it."""

import torch
from torch import Tensor

__all__ = ["three_interpolate"]


def three_interpolate(features: Tensor, indices: Tensor, weight: Tensor) -> Tensor:
    """mmcv.ops.three_interpolate: features [B, C, M], indices int32 [B, N, 3] in
    [0, M), weight [B, N, 3] -> [B, C, N], out[b, c, n] = sum_j weight[b, n, j] *
    features[b, c, indices[b, n, j]] (see docs/ops/three_interpolate.md)."""
    return torch.ops.mmops.three_interpolate(features, indices, weight)
