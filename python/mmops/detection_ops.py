"""Functional wrappers of mmops' detection ops: roi_pool and the focal losses."""

from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor

from ._utils import boxes_to_rois
from ._utils import pair as _pair


def roi_pool(
    input: Tensor,
    boxes: Union[Tensor, List[Tensor]],
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
) -> Tensor:
    """RoIPool with torchvision semantics (see README).

    input: [N, C, H, W]; boxes: [K, 5] (batch_index, x1, y1, x2, y2) or a list of
    per-image [Ki, 4] boxes in image coordinates. Returns [K, C, out_h, out_w]:
    the max of each bin (box corners scaled and rounded, bins quantised to whole
    pixels; an empty bin gives 0). Differentiable w.r.t. input.
    """
    return torch.ops.mmops.roi_pool(input, boxes_to_rois(boxes), _pair(output_size), float(spatial_scale))


def sigmoid_focal_loss(
    input: Tensor,
    target: Tensor,
    gamma: float = 2.0,
    alpha: float = 0.25,
    weight: Optional[Tensor] = None,
    reduction: str = "mean",
) -> Tensor:
    """mmcv.ops.sigmoid_focal_loss (see README).

    input: [N, C] logits; target: [N] int64 class ids in [0, C] (C = background);
    weight: optional [C] class weights, row n scaled by weight[target[n]]
    (background rows by 1). reduction "none" gives [N, C]; "mean" is sum / N
    (mmcv's: divided by the number of rows, not elements); "sum".
    """
    return torch.ops.mmops.sigmoid_focal_loss(input, target, float(gamma), float(alpha), weight, reduction)


def softmax_focal_loss(
    input: Tensor,
    target: Tensor,
    gamma: float = 2.0,
    alpha: float = 0.25,
    weight: Optional[Tensor] = None,
    reduction: str = "mean",
) -> Tensor:
    """mmcv.ops.softmax_focal_loss (see README).

    Per row: -alpha * (1 - p)^gamma * log(p), p = softmax(input[n])[target[n]],
    target in [0, C); weight: optional [C] class weights, row n scaled by
    weight[target[n]]. reduction "none" gives [N]; "mean" is sum / N; "sum".
    """
    return torch.ops.mmops.softmax_focal_loss(input, target, float(gamma), float(alpha), weight, reduction)


__all__ = ["roi_pool", "sigmoid_focal_loss", "softmax_focal_loss"]
