"""nms, batched_nms and the box utilities with torchvision's conventions.

nms / batched_nms run mmops' ops and return int64 keep indices by decreasing score.
The box utilities are plain torch (written for the same results as torchvision's,
integer boxes and leading batch dimensions included): they are small element-wise
expressions that need no kernel.
"""

from typing import Tuple

import torch
import torch.fx
from torch import Tensor


@torch.fx.wrap
def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """torchvision.ops.nms: boxes [N, 4] (x1, y1, x2, y2), scores [N]; drops a box whose
    IoU with a kept higher-scoring box is > iou_threshold. int64 indices, by score."""
    return torch.ops.mmops.nms(boxes, scores, float(iou_threshold))


@torch.fx.wrap
def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """torchvision.ops.batched_nms: nms inside each category of idxs [N] (any dtype),
    merged by decreasing score. Empty boxes (any shape) give an empty int64 tensor
    before the other arguments are looked at, as in torchvision."""
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.int64, device=boxes.device)
    if not _is_integer(idxs):
        # mmops' op wants integer categories: number each distinct value
        idxs = torch.unique(idxs, sorted=True, return_inverse=True)[1]
    return torch.ops.mmops.batched_nms(boxes, scores, idxs, float(iou_threshold))


def _is_integer(t: Tensor) -> bool:
    return not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool


def _upcast(t: Tensor) -> Tensor:
    """float16/bfloat16 -> float32, small integers -> int32 (products must not overflow)."""
    if t.is_floating_point():
        return t if t.dtype == torch.float32 or t.dtype == torch.float64 else t.float()
    return t if t.dtype == torch.int32 or t.dtype == torch.int64 else t.int()


def _check_format(fmt: str, what: str) -> None:
    """The axis-aligned formats; torchvision's rotated ones are not offered yet."""
    if fmt in ("xywhr", "cxcywhr", "xyxyxyxy"):
        raise NotImplementedError(f"mmops.tv.{what}: rotated boxes (fmt '{fmt}') are not supported yet")
    if fmt not in ("xyxy", "xywh", "cxcywh"):
        raise ValueError(f"mmops.tv.{what}: fmt must be 'xyxy', 'xywh' or 'cxcywh', got '{fmt}'")


def _to_xyxy(boxes: Tensor, fmt: str) -> Tensor:
    if fmt == "xywh":
        x, y, w, h = boxes.unbind(-1)
        return torch.stack((x, y, x + w, y + h), dim=-1)
    if fmt == "cxcywh":
        cx, cy, w, h = boxes.unbind(-1)
        return torch.stack((cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h), dim=-1)
    return boxes


def _from_xyxy(boxes: Tensor, fmt: str) -> Tensor:
    x1, y1, x2, y2 = boxes.unbind(-1)
    if fmt == "xywh":
        return torch.stack((x1, y1, x2 - x1, y2 - y1), dim=-1)
    if fmt == "cxcywh":
        return torch.stack(((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1), dim=-1)
    return boxes


@torch.fx.wrap
def box_convert(boxes: Tensor, in_fmt: str, out_fmt: str) -> Tensor:
    """torchvision.ops.box_convert between 'xyxy', 'xywh' and 'cxcywh' (boxes [..., 4]).
    A conversion through cxcywh of integer boxes gives floats, as in torchvision."""
    _check_format(in_fmt, "box_convert")
    _check_format(out_fmt, "box_convert")
    if in_fmt == out_fmt:
        return boxes.clone()
    return _from_xyxy(_to_xyxy(boxes, in_fmt), out_fmt)


@torch.fx.wrap
def box_area(boxes: Tensor, fmt: str = "xyxy") -> Tensor:
    """torchvision.ops.box_area: [...] areas of [..., 4] boxes (fmt xyxy, xywh or cxcywh);
    integer boxes give int32/int64 areas, half/bfloat16 ones float32."""
    _check_format(fmt, "box_area")
    boxes = _upcast(boxes)
    if fmt == "xyxy":
        return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])
    return boxes[..., 2] * boxes[..., 3]


def _corners(boxes: Tensor, fmt: str) -> Tuple[Tensor, Tensor]:
    """(top-left, bottom-right) [..., 2] of boxes in fmt, computed in the boxes' dtype."""
    if fmt == "xyxy":
        return boxes[..., :2], boxes[..., 2:]
    if fmt == "xywh":
        return boxes[..., :2], boxes[..., :2] + boxes[..., 2:]
    half = boxes[..., 2:] / 2
    return boxes[..., :2] - half, boxes[..., :2] + half


def _inter_union(boxes1: Tensor, boxes2: Tensor, fmt: str) -> Tuple[Tensor, Tensor]:
    """Pairwise intersection and union areas [..., N, M] (a 1-D boxes1 is one box)."""
    area1 = box_area(boxes1, fmt)
    area2 = box_area(boxes2, fmt)
    tl1, br1 = _corners(boxes1, fmt)
    tl2, br2 = _corners(boxes2, fmt)
    top_left = torch.max(tl1[..., None, :], tl2[..., None, :, :])
    bottom_right = torch.min(br1[..., None, :], br2[..., None, :, :])
    wh = _upcast(bottom_right - top_left).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    return inter, area1[..., None] + area2[..., None, :] - inter


@torch.fx.wrap
def box_iou(boxes1: Tensor, boxes2: Tensor, fmt: str = "xyxy") -> Tensor:
    """torchvision.ops.box_iou: IoU [..., N, M] of boxes1 [..., N, 4] and boxes2 [..., M, 4]
    (leading dimensions broadcast), fmt 'xyxy', 'xywh' or 'cxcywh'. Integer boxes give
    float32. A pair of zero-area boxes gives NaN (0 / 0), as in torchvision."""
    _check_format(fmt, "box_iou")
    inter, union = _inter_union(boxes1, boxes2, fmt)
    return inter / union


@torch.fx.wrap
def generalized_box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """torchvision.ops.generalized_box_iou of xyxy boxes: IoU - (hull - union) / hull,
    [..., N, M]."""
    inter, union = _inter_union(boxes1, boxes2, "xyxy")
    iou = inter / union
    top_left = torch.min(boxes1[..., None, :2], boxes2[..., None, :, :2])
    bottom_right = torch.max(boxes1[..., None, 2:], boxes2[..., None, :, 2:])
    wh = _upcast(bottom_right - top_left).clamp(min=0)
    hull = wh[..., 0] * wh[..., 1]
    return iou - (hull - union) / hull
