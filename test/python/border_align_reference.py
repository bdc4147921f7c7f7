"""float64 references of border_align (tests, property tests, benchmarks/bench_border_align.py).

border_align_ref: loops over the definition (mmcv's BorderAlign): for box k of image n and
border b (0 top, 1 left, 2 bottom, 3 right), pool_size + 1 points walked from (x1, y1)
(top, left) or (x2, y2) (bottom, right), step w / pool_size along x (top: +, bottom: -) or
h / pool_size along y (left: +, right: -), point i reached by i additions of the step;
each point bilinearly sampled (mmcv's rule: 0 outside [-1, size] on an axis, else clamped
into [0, size - 1]) from channel b * C + c; the output is the maximum (the first one wins
ties, a NaN wins and sticks). Differentiable w.r.t. input through torch ops (the gradient
goes to the winning point's neighbours).

border_align_composite: the same with torch.nn.functional.grid_sample (vectorised; the
benchmark's baseline and a check on larger inputs).
"""

import math

import torch
import torch.nn.functional as F


def _axis(coord, size):
    """mmcv's bilinear rule on one axis: (lo, hi, w_lo, w_hi), or None (worth 0)."""
    if not (-1.0 <= coord <= size):  # also NaN
        return None
    coord = max(coord, 0.0)
    lo = int(coord)
    if lo >= size - 1:
        return size - 1, size - 1, 1.0, 0.0
    frac = coord - lo
    return lo, lo + 1, 1.0 - frac, frac


def walk(box, border, pool_size):
    """The pool_size + 1 points (x, y) of one border of box (x1, y1, x2, y2), as floats."""
    x1, y1, x2, y2 = (float(v) for v in box)
    horizontal = border in (0, 2)
    step = ((x2 - x1) if horizontal else (y2 - y1)) / pool_size
    step = step if border < 2 else -step
    x, y = (x1, y1) if border < 2 else (x2, y2)
    dx, dy = (step, 0.0) if horizontal else (0.0, step)
    points = [(x, y)]
    for _ in range(pool_size):
        x, y = x + dx, y + dy
        points.append((x, y))
    return points


def _sample(plane, y, x):
    """plane [C, H, W] at (y, x) -> [C] (float64, differentiable)."""
    h, w = plane.shape[1:]
    ty, tx = _axis(y, h), _axis(x, w)
    if ty is None or tx is None:
        return plane.new_zeros(plane.shape[0])
    (ylo, yhi, hy, ly), (xlo, xhi, hx, lx) = ty, tx
    v = hy * hx * plane[:, ylo, xlo]
    v = v + hy * lx * plane[:, ylo, xhi]
    v = v + ly * hx * plane[:, yhi, xlo]
    return v + ly * lx * plane[:, yhi, xhi]


def _first_max(samples):
    """samples [C, P + 1] -> index [C] of the first maximum, a NaN winning and sticking."""
    best = samples[:, 0].clone()
    index = torch.zeros(samples.shape[0], dtype=torch.long)
    for i in range(1, samples.shape[1]):
        v = samples[:, i]
        take = (v > best) | (torch.isnan(v) & ~torch.isnan(best))
        best = torch.where(take, v, best)
        index = torch.where(take, torch.full_like(index, i), index)
    return index


def border_align_ref(input, boxes, pool_size, with_argmax=False):
    """float64 output [N, C, H * W, 4] (and the int64 argmax when with_argmax)."""
    n_, c4, h, w = input.shape
    c = c4 // 4
    x = input.double()
    outs, args = [], []
    for n in range(n_):
        per_box, per_box_arg = [], []
        for k in range(h * w):
            box = boxes[n, k].tolist()
            borders, borders_arg = [], []
            for b in range(4):
                plane = x[n, b * c : (b + 1) * c]
                samples = torch.stack([_sample(plane, py, px) for px, py in walk(box, b, pool_size)], dim=1)
                index = _first_max(samples.detach())
                borders.append(samples.gather(1, index[:, None])[:, 0])
                borders_arg.append(index)
            per_box.append(torch.stack(borders, dim=1))  # [C, 4]
            per_box_arg.append(torch.stack(borders_arg, dim=1))
        outs.append(torch.stack(per_box, dim=1) if per_box else x.new_zeros(c, 0, 4))  # [C, K, 4]
        args.append(torch.stack(per_box_arg, dim=1) if per_box_arg else torch.zeros(c, 0, 4, dtype=torch.long))
    out = torch.stack(outs) if outs else x.new_zeros(0, c, h * w, 4)
    if with_argmax:
        return out, (torch.stack(args) if args else torch.zeros(0, c, h * w, 4, dtype=torch.long))
    return out


def border_points(boxes, pool_size):
    """The points of every border: (xs, ys), each [N, 4, K, pool_size + 1], walked as mmcv
    (point i after i additions of the step), in the dtype of boxes."""
    x1, y1, x2, y2 = boxes.unbind(-1)  # [N, K]
    zero = torch.zeros_like(x1)
    step_x = (x2 - x1) / pool_size
    step_y = (y2 - y1) / pool_size
    x = torch.stack([x1, x1, x2, x2], dim=1)  # [N, 4, K]
    y = torch.stack([y1, y1, y2, y2], dim=1)
    dx = torch.stack([step_x, zero, -step_x, zero], dim=1)
    dy = torch.stack([zero, step_y, zero, -step_y], dim=1)
    xs, ys = [x], [y]
    for _ in range(pool_size):
        x, y = x + dx, y + dy
        xs.append(x)
        ys.append(y)
    return torch.stack(xs, dim=-1), torch.stack(ys, dim=-1)


def border_align_composite(input, boxes, pool_size):
    """grid_sample-based border_align: [N, C, H * W, 4] in input's dtype (H, W >= 2).

    Border padding reproduces the clamp into [0, size - 1] of points in [-1, size], a mask
    zeroes the points outside; the maximum over the points is torch.max's (its gradient goes
    to one sample)."""
    n_, c4, h, w = input.shape
    c = c4 // 4
    xs, ys = border_points(boxes, pool_size)  # [N, 4, K, P + 1]
    inside = (xs >= -1) & (xs <= w) & (ys >= -1) & (ys <= h)
    grid = torch.stack([xs * (2.0 / (w - 1)) - 1.0, ys * (2.0 / (h - 1)) - 1.0], dim=-1)
    grid = grid.to(input.dtype).reshape(n_ * 4, xs.shape[2], xs.shape[3], 2)
    planes = input.reshape(n_ * 4, c, h, w)
    samples = F.grid_sample(planes, grid, mode="bilinear", padding_mode="border", align_corners=True)
    samples = samples * inside.reshape(n_ * 4, 1, xs.shape[2], xs.shape[3]).to(samples.dtype)
    pooled = samples.max(dim=-1).values  # [N * 4, C, K]
    return pooled.reshape(n_, 4, c, -1).permute(0, 2, 3, 1)


def detector_boxes(n, h, w, generator, max_side=None, dtype=torch.float64):
    """Boxes around every pixel (a detector's predictions): centre near the pixel, sides
    log-uniform in [1, max_side] (default: half the map), some past the map's edges."""
    max_side = max_side or max(h, w) / 2
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64), indexing="ij")
    cx = xs.reshape(1, -1) + torch.rand(n, h * w, generator=generator, dtype=torch.float64) - 0.5
    cy = ys.reshape(1, -1) + torch.rand(n, h * w, generator=generator, dtype=torch.float64) - 0.5
    log_hi = math.log(max(max_side, 1.0))
    bw = torch.exp(torch.rand(n, h * w, generator=generator, dtype=torch.float64) * log_hi)
    bh = torch.exp(torch.rand(n, h * w, generator=generator, dtype=torch.float64) * log_hi)
    return torch.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], dim=-1).to(dtype)


def random_boxes(n, h, w, generator, dtype=torch.float64):
    """Boxes with corners drawn uniformly over the map (long borders, no locality)."""
    k = h * w
    xa, xb = (torch.rand(2, n, k, generator=generator, dtype=torch.float64) * (w - 1)).unbind(0)
    ya, yb = (torch.rand(2, n, k, generator=generator, dtype=torch.float64) * (h - 1)).unbind(0)
    return torch.stack(
        [torch.minimum(xa, xb), torch.minimum(ya, yb), torch.maximum(xa, xb), torch.maximum(ya, yb)], -1
    ).to(dtype)
