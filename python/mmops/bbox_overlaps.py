"""bbox_overlaps: the mmcv-style functional wrapper around
torch.ops.mmops.bbox_overlaps(bboxes1, bboxes2, mode="iou", aligned=False,
offset=0) -> Tensor (differentiable w.r.t. both box sets).
"""

import torch
from torch import Tensor

__all__ = ["bbox_overlaps"]


def bbox_overlaps(
    bboxes1: Tensor, bboxes2: Tensor, mode: str = "iou", aligned: bool = False, offset: int = 0
) -> Tensor:
    """mmcv.ops.bbox_overlaps: [M, N] overlaps (or [M] when aligned), "iou" or
    "iof" (over the area of the bboxes1 box); differentiable w.r.t. both sets."""
    return torch.ops.mmops.bbox_overlaps(bboxes1, bboxes2, mode, bool(aligned), int(offset))
