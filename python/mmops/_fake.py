"""Fake (meta) kernels registered from Python: only for ops whose output size
depends on the data (an unbacked size, which C++ meta kernels cannot create).
Every other op has its Meta kernel in C++ (src/<family>/<family>_meta.cpp).
"""

from typing import Tuple

import torch
from torch import Tensor

# nms-like ops return as many rows as boxes survive: an unbacked size.


def _check_boxes_scores(name: str, boxes: Tensor, scores: Tensor) -> None:
    torch._check(boxes.dim() == 2 and boxes.size(1) == 4,
                 lambda: f"mmops::{name}: expected boxes to be a 2-D tensor of shape [N, 4], "
                         f"but got shape {list(boxes.shape)}")
    torch._check(scores.dim() == 1, lambda: f"mmops::{name}: expected scores to be a 1-D tensor of "
                                            f"shape [N], but got shape {list(scores.shape)}")
    torch._check(scores.size(0) == boxes.size(0),
                 lambda: f"mmops::{name}: expected scores of shape [N] with N = boxes.size(0)")
    torch._check(boxes.dtype.is_floating_point and scores.dtype.is_floating_point,
                 lambda: f"mmops::{name}: expected floating point boxes and scores")


def _kept_count(boxes: Tensor):
    ctx = torch.library.get_ctx()
    return ctx.new_dynamic_size()


@torch.library.register_fake("mmops::nms")
def _nms_fake(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    _check_boxes_scores("nms", boxes, scores)
    return boxes.new_empty((_kept_count(boxes),), dtype=torch.long)


@torch.library.register_fake("mmops::batched_nms")
def _batched_nms_fake(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    _check_boxes_scores("batched_nms", boxes, scores)
    torch._check(idxs.dim() == 1 and idxs.size(0) == boxes.size(0),
                 lambda: "mmops::batched_nms: expected idxs to be a 1-D tensor of shape [N]")
    return boxes.new_empty((_kept_count(boxes),), dtype=torch.long)


@torch.library.register_fake("mmops::soft_nms")
def _soft_nms_fake(boxes: Tensor, scores: Tensor, iou_threshold: float = 0.3, sigma: float = 0.5,
                   min_score: float = 1e-3, method: str = "linear") -> Tuple[Tensor, Tensor]:
    _check_boxes_scores("soft_nms", boxes, scores)
    k = _kept_count(boxes)
    return boxes.new_empty((k, 5)), boxes.new_empty((k,), dtype=torch.long)


