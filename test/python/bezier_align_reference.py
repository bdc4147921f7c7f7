"""float64 references of bezier_align (tests, property tests, benchmarks/bench_bezier_align.py).

bezier_align_ref: loops over the definition (mmcv's BezierAlign). A roi is (batch index,
then 8 control points x, y: columns 1..8 the top cubic Bezier curve from its left end,
columns 9..16 the bottom curve from its right end), scaled by spatial_scale. Bin (ph, pw)
of a PH x PW grid is centred at top(u) * (1 - v) + bottom(u) * v - offset with u = pw / PW,
v = ph / PH, offset 0.5 when aligned; it is a bin_h x bin_w rectangle (roi_w = the larger
|x_left - x_right| of the two curves, roi_h likewise in y, each at least 1 when not
aligned, divided by PW / PH) averaging grid_h x grid_w samples at its sub-grid's centres
(sampling_ratio > 0, else ceil(bin size), at most 512), each sampled with mmcv's bilinear
rule (0 outside [-1, size] on an axis, else clamped into [0, size - 1]). A roi with a
non-finite control point, or whose batch index is outside [0, N), pools zeros. The result
is a product of input with a weight matrix built in Python floats: differentiable w.r.t.
input through torch ops.

bezier_align_composite: the same with torch.nn.functional.grid_sample (vectorised, a fixed
sampling_ratio > 0, H, W >= 2): the benchmark's baseline and a check on larger inputs.

text_rois / random_rois: roi distributions (curved text lines; control points anywhere).
"""

import math

import torch
import torch.nn.functional as F

MAX_ADAPTIVE_GRID = 512


def _axis(coord, size):
    """mmcv's bilinear rule on one axis: [(index, weight), ...], or [] (worth 0)."""
    if not (-1.0 <= coord <= size):  # also NaN
        return []
    coord = max(coord, 0.0)
    lo = int(coord)
    if lo >= size - 1:
        return [(size - 1, 1.0)]
    frac = coord - lo
    return [(lo, 1.0 - frac), (lo + 1, frac)]


def _cubic(p0, p1, p2, p3, u):
    s = 1.0 - u
    return s * s * s * p0 + 3.0 * u * s * s * p1 + 3.0 * u * u * s * p2 + u * u * u * p3


def _grid(size, pooled, sampling_ratio):
    if sampling_ratio > 0:
        return sampling_ratio
    n = math.ceil(size / pooled)
    return min(max(n, 0), MAX_ADAPTIVE_GRID)


def curves(roi, spatial_scale):
    """The top and bottom curves' control points [(x, y)] * 4, both from their left end."""
    v = [float(t) * spatial_scale for t in roi[1:]]
    top = [(v[2 * i], v[2 * i + 1]) for i in range(4)]
    bottom = [(v[14 - 2 * i], v[15 - 2 * i]) for i in range(4)]
    return top, bottom


def roi_weights(roi, out_h, out_w, spatial_scale, sampling_ratio, aligned, h, w):
    """[out_h * out_w, h * w] float64: bin b of roi pools sum_j W[b, j] * plane[j]."""
    weights = torch.zeros(out_h * out_w, h * w, dtype=torch.float64)
    top, bottom = curves(roi, spatial_scale)
    points = [c for p in top + bottom for c in p]
    if not all(math.isfinite(c) for c in points):
        return weights
    roi_w = max(abs(top[0][0] - top[3][0]), abs(bottom[0][0] - bottom[3][0]))
    roi_h = max(abs(top[0][1] - top[3][1]), abs(bottom[0][1] - bottom[3][1]))
    if not (math.isfinite(roi_w) and math.isfinite(roi_h)):
        return weights
    if not aligned:
        roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
    offset = 0.5 if aligned else 0.0
    bin_h, bin_w = roi_h / out_h, roi_w / out_w
    gh, gw = _grid(roi_h, out_h, sampling_ratio), _grid(roi_w, out_w, sampling_ratio)
    if gh * gw == 0:
        return weights
    for ph in range(out_h):
        for pw in range(out_w):
            u, v = pw / out_w, ph / out_h
            x0 = _cubic(*(p[0] for p in top), u)
            y0 = _cubic(*(p[1] for p in top), u)
            x1 = _cubic(*(p[0] for p in bottom), u)
            y1 = _cubic(*(p[1] for p in bottom), u)
            cx = x1 * v + x0 * (1.0 - v) - offset
            cy = y1 * v + y0 * (1.0 - v) - offset
            row = weights[ph * out_w + pw]
            for iy in range(gh):
                y = cy - 0.5 * bin_h + (iy + 0.5) * bin_h / gh
                for ix in range(gw):
                    x = cx - 0.5 * bin_w + (ix + 0.5) * bin_w / gw
                    for yi, wy in _axis(y, h):
                        for xi, wx in _axis(x, w):
                            row[yi * w + xi] += wy * wx / (gh * gw)
    return weights


def bezier_align_ref(input, rois, output_size, spatial_scale=1.0, sampling_ratio=0, aligned=True):
    """[K, C, out_h, out_w] in float64, differentiable w.r.t. input."""
    out_h, out_w = (output_size, output_size) if isinstance(output_size, int) else output_size
    x = input.double()
    n, c, h, w = x.shape
    outs = []
    for roi in rois.detach().double().cpu().tolist():
        b = roi[0]
        if not (0 <= b < n):
            outs.append(x.new_zeros(c, out_h, out_w))
            continue
        weights = roi_weights(roi, out_h, out_w, spatial_scale, sampling_ratio, aligned, h, w).to(x.device)
        outs.append((x[int(b)].reshape(c, h * w) @ weights.t()).reshape(c, out_h, out_w))
    if not outs:
        return x.new_zeros(0, c, out_h, out_w)
    return torch.stack(outs)


def _bernstein(u):
    s = 1.0 - u
    return torch.stack([s**3, 3 * u * s**2, 3 * u**2 * s, u**3], dim=-1)  # [..., 4]


def bezier_align_composite(input, rois, output_size, spatial_scale=1.0, sampling_ratio=2, aligned=True):
    """grid_sample-based bezier_align, [K, C, out_h, out_w] in input's dtype (a fixed
    sampling_ratio > 0; H, W >= 2; batch indices in range). Border padding reproduces the
    clamp into [0, size - 1] of samples in [-1, size], a mask zeroes the samples outside."""
    out_h, out_w = output_size
    n, c, h, w = input.shape
    g = sampling_ratio
    dt = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
    r = rois.to(dt)
    pts = r[:, 1:] * spatial_scale
    top = pts[:, :8].reshape(-1, 4, 2)
    bottom = pts[:, 8:].reshape(-1, 4, 2).flip(1)  # from its left end
    u = torch.arange(out_w, device=r.device, dtype=dt) / out_w
    v = (torch.arange(out_h, device=r.device, dtype=dt) / out_h).view(1, out_h, 1, 1)
    basis = _bernstein(u)  # [PW, 4]
    top_pts = torch.einsum("wj,kjd->kwd", basis, top)[:, None]  # [K, 1, PW, 2]
    bottom_pts = torch.einsum("wj,kjd->kwd", basis, bottom)[:, None]
    offset = 0.5 if aligned else 0.0
    centre = top_pts * (1 - v) + bottom_pts * v - offset  # [K, PH, PW, 2]
    roi_w = torch.maximum((top[:, 0, 0] - top[:, 3, 0]).abs(), (bottom[:, 0, 0] - bottom[:, 3, 0]).abs())
    roi_h = torch.maximum((top[:, 0, 1] - top[:, 3, 1]).abs(), (bottom[:, 0, 1] - bottom[:, 3, 1]).abs())
    if not aligned:
        roi_w, roi_h = roi_w.clamp(min=1), roi_h.clamp(min=1)
    frac = (torch.arange(g, device=r.device, dtype=dt) + 0.5) / g - 0.5  # [G]
    dx = (roi_w / out_w).view(-1, 1) * frac  # [K, G]
    dy = (roi_h / out_h).view(-1, 1) * frac
    # [K, PH, G(y), PW, G(x)]
    xs = centre[..., 0].view(-1, out_h, 1, out_w, 1) + dx.view(-1, 1, 1, 1, g)
    ys = centre[..., 1].view(-1, out_h, 1, out_w, 1) + dy.view(-1, 1, g, 1, 1)
    xs, ys = torch.broadcast_tensors(xs, ys)
    inside = ((xs >= -1) & (xs <= w) & (ys >= -1) & (ys <= h)).to(input.dtype)
    grid = torch.stack([xs * (2.0 / (w - 1)) - 1.0, ys * (2.0 / (h - 1)) - 1.0], dim=-1).to(input.dtype)
    grid = grid.reshape(-1, out_h * g, out_w * g, 2)
    batch = r[:, 0].long()
    out = input.new_zeros(rois.size(0), c, out_h, out_w)
    for b in range(n):
        rows = (batch == b).nonzero().flatten()
        if rows.numel() == 0:
            continue
        grid_b = grid[rows].reshape(1, -1, out_w * g, 2)
        samples = F.grid_sample(input[b : b + 1], grid_b, mode="bilinear", padding_mode="border", align_corners=True)
        samples = samples.view(c, rows.numel(), out_h, g, out_w, g) * inside[rows][None]
        out = out.index_copy(0, rows, samples.mean(dim=(3, 5)).transpose(0, 1))
    return out


def text_rois(k, batch, h, w, generator, dtype=torch.float64, spatial_scale=1.0):
    """Curved text lines: a left-to-right arc of random length, height, bend and slant; the
    bottom curve is the top one shifted down by the line height (stored right to left), in
    image coordinates (feature coordinates / spatial_scale); the maps' rois may pass the
    bottom edge by up to a quarter of the height."""
    rnd = lambda *s: torch.rand(*s, generator=generator, dtype=torch.float64)  # noqa: E731
    length = (0.15 + 0.6 * rnd(k)) * w
    height = (0.05 + 0.2 * rnd(k)) * h
    x0 = rnd(k) * (w - length)
    y0 = rnd(k) * (h - height)
    bend = (rnd(k) - 0.5) * height * 2
    slant = (rnd(k) - 0.5) * height  # the right end higher or lower: roi_h > 0 (see bezier_align.md)
    xs = x0[:, None] + length[:, None] * torch.tensor([0.0, 1 / 3, 2 / 3, 1.0], dtype=torch.float64)
    ys = y0[:, None] + bend[:, None] * torch.tensor([0.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    ys = ys + slant[:, None] * torch.tensor([0.0, 1 / 3, 2 / 3, 1.0], dtype=torch.float64)
    top = torch.stack([xs, ys], -1)  # [K, 4, 2]
    bottom = torch.stack([xs, ys + height[:, None]], -1).flip(1)
    idx = torch.randint(0, batch, (k, 1), generator=generator).to(torch.float64)
    pts = torch.cat([top.reshape(k, 8), bottom.reshape(k, 8)], 1) / spatial_scale
    return torch.cat([idx, pts], 1).to(dtype)


def random_rois(k, batch, h, w, generator, dtype=torch.float64, spatial_scale=1.0, margin=0.3):
    """Control points drawn uniformly over the map and up to `margin` of it outside
    (crossing, reversed, degenerate curves; no locality)."""
    lo = torch.tensor([-margin * w, -margin * h], dtype=torch.float64)
    span = torch.tensor([(1 + 2 * margin) * w, (1 + 2 * margin) * h], dtype=torch.float64)
    pts = lo + span * torch.rand(k, 8, 2, generator=generator, dtype=torch.float64)
    idx = torch.randint(0, batch, (k, 1), generator=generator).to(torch.float64)
    return torch.cat([idx, pts.reshape(k, 16) / spatial_scale], 1).to(dtype)


def box_rois(boxes):
    """[K, 17] straight-line Beziers of axis-aligned boxes [K, 5] (batch, x1, y1, x2, y2):
    control points evenly spaced (u maps linearly to x), the top edge y1, the bottom y2."""
    b, x1, y1, x2, y2 = boxes.unbind(1)
    t = torch.tensor([0.0, 1 / 3, 2 / 3, 1.0], dtype=boxes.dtype, device=boxes.device)
    xs = x1[:, None] + (x2 - x1)[:, None] * t  # [K, 4]
    top = torch.stack([xs, y1[:, None].expand_as(xs)], -1)
    bottom = torch.stack([xs, y2[:, None].expand_as(xs)], -1).flip(1)
    return torch.cat([b[:, None], top.reshape(-1, 8), bottom.reshape(-1, 8)], 1)
