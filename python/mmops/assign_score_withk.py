"""assign_score_withk: the functional wrapper (mmcv.ops.assign_score_withk) and a module."""

import torch
from torch import Tensor, nn


def assign_score_withk(
    scores: Tensor, point_features: Tensor, center_features: Tensor, knn_idx: Tensor, aggregate: str = "sum"
) -> Tensor:
    """PAConv's score assignment with mmcv's semantics (docs/ops/assign_score_withk.md).

    scores: [B, npoint, K, M]; point_features, center_features: [B, N, M, O];
    knn_idx: [B, npoint, K] int64 or int32, knn_idx[b, n, 0] the center of neighbourhood n.
    Returns [B, O, npoint, K]: sum over m of scores[b, n, k, m] *
    (point_features[b, knn_idx[b, n, k], m, o] - center_features[b, knn_idx[b, n, 0], m, o]).
    aggregate ('sum', 'avg' or 'max') is checked and, as in mmcv, has no effect.
    Differentiable w.r.t. scores, point_features and center_features.
    """
    return torch.ops.mmops.assign_score_withk(scores, point_features, center_features, knn_idx, aggregate)


class AssignScoreWithK(nn.Module):
    """assign_score_withk as a module: forward(scores, point_features, center_features, knn_idx)."""

    def __init__(self, aggregate: str = "sum"):
        super().__init__()
        self.aggregate = aggregate

    def forward(self, scores: Tensor, point_features: Tensor, center_features: Tensor, knn_idx: Tensor) -> Tensor:
        return assign_score_withk(scores, point_features, center_features, knn_idx, self.aggregate)

    def extra_repr(self) -> str:
        return f"aggregate={self.aggregate!r}"


__all__ = ["assign_score_withk", "AssignScoreWithK"]
