"""References of diff_iou_rotated_2d / _3d that tests and benchmarks share.

* exact_iou_2d / exact_iou_3d: the exact (Fraction) IoU of float64 boxes,
  through polygon_reference (no torch in the geometry);
* composite_iou_2d / composite_iou_3d: the candidate-vertex method in plain
  torch ops, differentiable by autograd (the benchmark's baseline and an
  independent gradient check): corners of each box inside the other plus
  the edge-edge crossings, sorted by angle around their mean, then the
  shoelace formula.
"""

import math
from fractions import Fraction
from typing import Sequence

import polygon_reference as ref
import torch
from torch import Tensor

# ----------------------------------------------------------------------------- exact


def _valid(values: Sequence[float], sizes: Sequence[int]) -> bool:
    return all(math.isfinite(v) for v in values) and all(values[i] > 0 for i in sizes)


def exact_inter_2d(a: Sequence[float], b: Sequence[float]) -> Fraction:
    """The exact intersection area of two (x, y, w, h, alpha) boxes."""
    return ref.intersection_area(ref.rotated_box_corners(*a), ref.rotated_box_corners(*b))


def exact_iou_2d(a: Sequence[float], b: Sequence[float]) -> float:
    a, b = [float(v) for v in a], [float(v) for v in b]
    if not (_valid(a, (2, 3)) and _valid(b, (2, 3))):
        return 0.0
    return ref.rotated_overlap(a, b)


def exact_iou_3d(a: Sequence[float], b: Sequence[float]) -> float:
    """(x, y, z, w, h, l, alpha): the ground-plane box (x, y, w, h, alpha), the
    vertical extent z -+ l / 2."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if not (_valid(a, (3, 4, 5)) and _valid(b, (3, 4, 5))):
        return 0.0
    a2, b2 = [a[0], a[1], a[3], a[4], a[6]], [b[0], b[1], b[3], b[4], b[6]]
    area_a = ref.signed_area(ref.rotated_box_corners(*a2))
    area_b = ref.signed_area(ref.rotated_box_corners(*b2))
    inter = exact_inter_2d(a2, b2)
    za, la, zb, lb = (Fraction(v) for v in (a[2], a[5], b[2], b[5]))
    zo = max(min(za + la / 2, zb + lb / 2) - max(za - la / 2, zb - lb / 2), Fraction(0))
    overlap = inter * zo
    union = area_a * la + area_b * lb - overlap
    return float(overlap / union) if union > 0 else 0.0


# ----------------------------------------------------------------------------- composite


def box_corners(box: Tensor) -> Tensor:
    """[..., 5] (x, y, w, h, alpha) -> [..., 4, 2] counter-clockwise corners."""
    x, y, w, h, alpha = box.unbind(-1)
    c, s = torch.cos(alpha), torch.sin(alpha)
    sx = torch.tensor([-0.5, 0.5, 0.5, -0.5], dtype=box.dtype, device=box.device)
    sy = torch.tensor([-0.5, -0.5, 0.5, 0.5], dtype=box.dtype, device=box.device)
    px, py = sx * w[..., None], sy * h[..., None]
    cx = x[..., None] + px * c[..., None] - py * s[..., None]
    cy = y[..., None] + px * s[..., None] + py * c[..., None]
    return torch.stack([cx, cy], dim=-1)


def _inside(points: Tensor, corners: Tensor) -> Tensor:
    """[..., P, 2] points inside (or on) the box with [..., 4, 2] corners."""
    a, b, d = corners[..., 0:1, :], corners[..., 1:2, :], corners[..., 3:4, :]
    ab, ad, ap = b - a, d - a, points - a
    pab, pad = (ap * ab).sum(-1), (ap * ad).sum(-1)
    return (pab >= 0) & (pab <= (ab * ab).sum(-1)) & (pad >= 0) & (pad <= (ad * ad).sum(-1))


def _crossings(c1: Tensor, c2: Tensor):
    """Edge-edge crossings [..., 16, 2] and their mask (strictly inside both edges)."""
    p, r = c1, c1.roll(-1, dims=-2) - c1  # edges p + t r
    q, s = c2, c2.roll(-1, dims=-2) - c2
    p, r = p[..., :, None, :], r[..., :, None, :]
    q, s = q[..., None, :, :], s[..., None, :, :]

    def cross(u, v):
        return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]

    den = cross(r, s)
    safe = torch.where(den == 0, torch.ones_like(den), den)
    t = cross(q - p, s) / safe
    u = cross(q - p, r) / safe
    mask = (den != 0) & (t > 0) & (t < 1) & (u > 0) & (u < 1)
    points = p + t[..., None] * r
    shape = points.shape[:-3] + (16, 2)
    return points.reshape(shape), mask.reshape(shape[:-1])


def composite_inter_2d(box1: Tensor, box2: Tensor) -> Tensor:
    """The intersection area of aligned [..., 5] boxes, by autograd-friendly torch ops."""
    c1, c2 = box_corners(box1), box_corners(box2)
    in1, in2 = _inside(c1, c2), _inside(c2, c1)
    # coincident corners (as mmcv's check_overlap): kept once, as box1's
    same = (c1[..., :, None, :] == c2[..., None, :, :]).all(-1)  # [..., 4 of box1, 4 of box2]
    points, crossing = _crossings(c1, c2)
    vertices = torch.cat([c1, c2, points], dim=-2)  # [..., 24, 2]
    mask = torch.cat([in1 | same.any(-1), in2 & ~same.any(-2), crossing], dim=-1)
    count = mask.sum(-1, keepdim=True)
    weights = mask.to(vertices.dtype)
    mean = (vertices * weights[..., None]).sum(-2) / count.clamp(min=1)
    rel = vertices - mean[..., None, :]
    angle = torch.atan2(rel[..., 1], rel[..., 0]).detach()
    angle = torch.where(mask, angle, torch.full_like(angle, 10.0))  # invalid ones last
    order = angle.argsort(dim=-1)
    sorted_v = rel.gather(-2, order[..., None].expand(rel.shape))
    valid = mask.gather(-1, order)
    nxt_index = torch.arange(24, device=box1.device).expand(order.shape)
    nxt_index = torch.where(nxt_index + 1 < count, nxt_index + 1, torch.zeros_like(nxt_index))
    nxt = sorted_v.gather(-2, nxt_index[..., None].expand(rel.shape))
    terms = sorted_v[..., 0] * nxt[..., 1] - sorted_v[..., 1] * nxt[..., 0]
    area = (terms * valid.to(terms.dtype)).sum(-1) / 2
    return torch.where(count.squeeze(-1) >= 3, area.abs(), torch.zeros_like(area))


def composite_iou_2d(box1: Tensor, box2: Tensor) -> Tensor:
    inter = composite_inter_2d(box1, box2)
    union = box1[..., 2] * box1[..., 3] + box2[..., 2] * box2[..., 3] - inter
    return inter / union


def composite_iou_3d(box1: Tensor, box2: Tensor) -> Tensor:
    cols = [0, 1, 3, 4, 6]
    inter = composite_inter_2d(box1[..., cols], box2[..., cols])
    top = torch.minimum(box1[..., 2] + box1[..., 5] / 2, box2[..., 2] + box2[..., 5] / 2)
    bottom = torch.maximum(box1[..., 2] - box1[..., 5] / 2, box2[..., 2] - box2[..., 5] / 2)
    overlap = inter * (top - bottom).clamp(min=0)
    volume1 = box1[..., 3] * box1[..., 4] * box1[..., 5]
    volume2 = box2[..., 3] * box2[..., 4] * box2[..., 5]
    return overlap / (volume1 + volume2 - overlap)
