"""Float64 references of the iou3d ops (mmcv's BEV boxes) for the tests: exact areas and IoU
through polygon_reference.py's Fractions, and the axis-aligned IoU of nms_normal_bev. Plain
Python, written independently of the kernels."""

import math

import torch
from polygon_reference import intersection_area, rotated_box_corners, rotated_overlap


def as_rotated(row):
    """(cx, cy, w, h, theta) of a [7] (x, y, z, dx, dy, dz, heading) or [5] (x1, y1, x2, y2, ry) row."""
    if len(row) == 7:
        return [row[0], row[1], row[3], row[4], row[6]]
    x1, y1, x2, y2, r = row
    return [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, r]


def area_ref(a, b):
    """Exact intersection area of two (cx, cy, w, h, theta) boxes; 0 for a non-finite value or a side <= 0."""
    if not all(math.isfinite(v) for v in a + b) or min(a[2], a[3], b[2], b[3]) <= 0:
        return 0.0
    return float(intersection_area(rotated_box_corners(*a), rotated_box_corners(*b)))


def overlaps_ref(boxes_a, boxes_b, iou):
    """[N, M] float64: IoU (iou=True) or intersection areas of the boxes' float64 values."""
    a = [as_rotated(r) for r in boxes_a.detach().double().cpu().tolist()]
    b = [as_rotated(r) for r in boxes_b.detach().double().cpu().tolist()]
    pair = rotated_overlap if iou else area_ref
    return torch.tensor([[pair(x, y) for y in b] for x in a], dtype=torch.float64).reshape(len(a), len(b))


def aligned_iou_ref(boxes):
    """[N, N] float64 IoU of [N, 5] (x1, y1, x2, y2, ry) boxes with the angle ignored (mmcv's nms)."""
    b = boxes.detach().double().cpu()
    lt = torch.maximum(b[:, None, :2], b[None, :, :2])
    rb = torch.minimum(b[:, None, 2:4], b[None, :, 2:4])
    inter = (rb - lt).clamp(min=0).prod(2)
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area[:, None] + area[None, :] - inter
    return torch.where(union > 0, inter / union, torch.zeros_like(union))
