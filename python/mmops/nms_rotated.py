"""nms_rotated and nms_quadri: mmcv-style functional wrappers around

    torch.ops.mmops.nms_rotated(boxes, scores, iou_threshold, labels=None, clockwise=True) -> keep
    torch.ops.mmops.nms_quadri(boxes, scores, iou_threshold, labels=None) -> keep

keep: int64 indices by decreasing score (ties: lower index first; a NaN score
after every number). With labels, boxes of different labels never suppress
each other (class-aware in one call). The fake kernels: mmops/_fake.py.
"""

from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

__all__ = ["nms_rotated", "nms_quadri"]


def _with_scores(dets: Tensor, scores: Tensor, keep: Tensor) -> Tensor:
    return torch.cat((dets[keep], scores[keep].reshape(-1, 1).to(dets.dtype)), dim=1)


def nms_rotated(
    dets: Tensor, scores: Tensor, iou_threshold: float, labels: Optional[Tensor] = None, clockwise: bool = True
) -> Tuple[Tensor, Tensor]:
    """mmcv.ops.nms_rotated: (dets [K, 6] = (cx, cy, w, h, angle, score), keep [K]).

    Empty input: ([0, 6], [0]) where mmcv returns (dets, None)."""
    keep = torch.ops.mmops.nms_rotated(dets, scores, float(iou_threshold), labels, bool(clockwise))
    return _with_scores(dets, scores, keep), keep


def nms_quadri(
    dets: Tensor, scores: Tensor, iou_threshold: float, labels: Optional[Tensor] = None
) -> Tuple[Tensor, Tensor]:
    """mmcv.ops.nms_quadri: (dets [K, 9] = (x1, y1, ..., x4, y4, score), keep [K])."""
    keep = torch.ops.mmops.nms_quadri(dets, scores, float(iou_threshold), labels)
    return _with_scores(dets, scores, keep), keep


def _rotated_batched_nms(
    nms_type: str, boxes: Tensor, scores: Tensor, idxs: Tensor, cfg: Dict[str, Any], class_agnostic: bool, max_num: int
) -> Tuple[Tensor, Tensor]:
    """batched_nms with nms_cfg type "nms_rotated" / "nms_quadri" (mmops.nms
    calls it): the categories go in as labels, no coordinate offsets."""
    iou_threshold = float(cfg.pop("iou_threshold"))
    labels = None if class_agnostic else idxs
    if nms_type == "nms_rotated":
        clockwise = bool(cfg.pop("clockwise", True))
        if cfg:
            raise ValueError(f"mmops.batched_nms: unknown nms_cfg keys {sorted(cfg)}")
        keep = torch.ops.mmops.nms_rotated(boxes, scores, iou_threshold, labels, clockwise)
    else:
        if cfg:
            raise ValueError(f"mmops.batched_nms: unknown nms_cfg keys {sorted(cfg)}")
        keep = torch.ops.mmops.nms_quadri(boxes, scores, iou_threshold, labels)
    if max_num > 0:
        keep = keep[:max_num]
    return _with_scores(boxes, scores, keep), keep
