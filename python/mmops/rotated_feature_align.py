"""rotated_feature_align: the functional wrapper (mmcv.ops.rotated_feature_align) and a module."""

import torch
from torch import Tensor, nn


def rotated_feature_align(
    features: Tensor, best_rbboxes: Tensor, spatial_scale: float = 1 / 8, points: int = 1
) -> Tensor:
    """R3Det / S2A-Net feature refinement with mmcv's semantics (docs/ops/rotated_feature_align.md).

    features: [N, C, H, W]; best_rbboxes: [N, H, W, 5] per pixel, in mmcv's layout
    (b0 * spatial_scale is the row and b1 * spatial_scale the column of the centre,
    b2, b3 the width and height, b4 the angle in radians). points: 1 (centre) or 5
    (centre and corners). Returns features + the bilinear samples of features at
    the points ([N, C, H, W], features' memory format). Differentiable w.r.t. features.
    """
    return torch.ops.mmops.rotated_feature_align(features, best_rbboxes, float(spatial_scale), int(points))


class RotatedFeatureAlign(nn.Module):
    """rotated_feature_align as a module: forward(features, best_rbboxes)."""

    def __init__(self, spatial_scale: float = 1 / 8, points: int = 1) -> None:
        super().__init__()
        self.spatial_scale = float(spatial_scale)
        self.points = int(points)

    def forward(self, features: Tensor, best_rbboxes: Tensor) -> Tensor:
        return rotated_feature_align(features, best_rbboxes, self.spatial_scale, self.points)

    def extra_repr(self) -> str:
        return f"spatial_scale={self.spatial_scale}, points={self.points}"


__all__ = ["rotated_feature_align", "RotatedFeatureAlign"]
