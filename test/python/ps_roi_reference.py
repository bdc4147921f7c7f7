"""Independent float64 references for mmops::ps_roi_align and mmops::ps_roi_pool
(torchvision's position-sensitive RoI pooling), written from the specification with
plain loops (no mmops / torchvision calls).

The outputs are differentiable w.r.t. ``input`` through plain torch indexing, so
``torch.autograd.grad`` on them gives the expected input gradient. The box geometry
is computed in ``geometry`` precision (numpy float32 or float64), as the kernels
compute it in the accumulation type of the input's dtype.
"""

import math

import numpy as np
import torch

MAX_ADAPTIVE_GRID = 512
MAX_COORD = 2.0**24


def geometry_dtype(dtype):
    """The precision the kernels compute box geometry in, for an input dtype."""
    return np.float64 if dtype == torch.float64 else np.float32


def _roi_values(roi, scale, g):
    return [g(float(v)) for v in roi[1:5]], g(scale)


def _batch(roi, batch):
    b = float(roi[0])
    return int(b) if 0 <= b < batch else -1


def _bilinear(plane, y, x):
    """torchvision's ps_roi_align sample: 0 outside [-1, size] on either axis (NaN too);
    a coordinate below 0 reads 0, one at or past size - 1 the last row / column."""
    height, width = plane.shape
    if not (-1 <= y <= height and -1 <= x <= width):
        return plane.new_zeros(())
    y, x = max(y, 0.0), max(x, 0.0)
    y_lo, x_lo = int(y), int(x)
    if y_lo >= height - 1:
        y_lo = y_hi = height - 1
        y = float(y_lo)
    else:
        y_hi = y_lo + 1
    if x_lo >= width - 1:
        x_lo = x_hi = width - 1
        x = float(x_lo)
    else:
        x_hi = x_lo + 1
    ly, lx = y - y_lo, x - x_lo
    hy, hx = 1 - ly, 1 - lx
    return (
        hy * hx * plane[y_lo, x_lo]
        + hy * lx * plane[y_lo, x_hi]
        + ly * hx * plane[y_hi, x_lo]
        + ly * lx * plane[y_hi, x_hi]
    )


def ps_roi_align_ref(input, rois, output_size, spatial_scale=1.0, sampling_ratio=-1):
    """[K, C / (PH * PW), PH, PW] float64, differentiable w.r.t. input."""
    g = geometry_dtype(input.dtype)
    x = input.double()
    N, C, H, W = x.shape
    PH, PW = output_size
    C_out = C // (PH * PW)
    rows = []
    for roi in rois:
        (x1, y1, x2, y2), s = _roi_values(roi, spatial_scale, g)
        b = _batch(roi, N)
        sx1, sy1, sx2, sy2 = x1 * s, y1 * s, x2 * s, y2 * s
        if not all(np.isfinite(v) for v in (sx1, sy1, sx2, sy2)):
            b = -1
        start_w, start_h = sx1 - g(0.5), sy1 - g(0.5)
        roi_w, roi_h = (sx2 - g(0.5)) - start_w, (sy2 - g(0.5)) - start_h
        bin_w, bin_h = roi_w / g(PW), roi_h / g(PH)

        def grid(size, pooled):
            if sampling_ratio > 0:
                return sampling_ratio
            n = math.ceil(size / pooled) if np.isfinite(size) else 0
            return max(0, min(n, MAX_ADAPTIVE_GRID))

        gh, gw = grid(roi_h, g(PH)), grid(roi_w, g(PW))
        out = x.new_zeros(C_out, PH, PW)
        if b >= 0 and gh * gw > 0:
            vals = []
            for c in range(C_out):
                for ph in range(PH):
                    for pw in range(PW):
                        plane = x[b, (c * PH + ph) * PW + pw]
                        total = plane.new_zeros(())
                        for iy in range(gh):
                            yy = start_h + g(ph) * bin_h + (g(iy) + g(0.5)) * bin_h / g(gh)
                            for ix in range(gw):
                                xx = start_w + g(pw) * bin_w + (g(ix) + g(0.5)) * bin_w / g(gw)
                                total = total + _bilinear(plane, float(yy), float(xx))
                        vals.append(total / (gh * gw))
            out = torch.stack(vals).reshape(C_out, PH, PW)
        rows.append(out)
    if not rows:
        return x.new_zeros(0, C_out, PH, PW)
    return torch.stack(rows)


def _round_away(v):
    r = math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)
    return int(min(max(r, -MAX_COORD), MAX_COORD))


def ps_roi_pool_ref(input, rois, output_size, spatial_scale=1.0):
    """[K, C / (PH * PW), PH, PW] float64, differentiable w.r.t. input. Bins are clamped
    into [0, size - 1], as torchvision's forward does (the last row / column is never read)."""
    g = geometry_dtype(input.dtype)
    x = input.double()
    N, C, H, W = x.shape
    PH, PW = output_size
    C_out = C // (PH * PW)
    rows = []
    for roi in rois:
        (x1, y1, x2, y2), s = _roi_values(roi, spatial_scale, g)
        b = _batch(roi, N)
        scaled = (x1 * s, y1 * s, x2 * s, y2 * s)
        out = x.new_zeros(C_out, PH, PW)
        if b < 0 or not all(np.isfinite(v) for v in scaled):
            rows.append(out)
            continue
        sx1, sy1, sx2, sy2 = (_round_away(float(v)) for v in scaled)
        bin_w = g(max(sx2 - sx1, 1)) / g(PW)
        bin_h = g(max(sy2 - sy1, 1)) / g(PH)

        def span(p, binsz, start, size):
            lo = math.floor(g(p) * binsz) + start
            hi = math.ceil(g(p + 1) * binsz) + start
            return min(max(lo, 0), size - 1), min(max(hi, 0), size - 1)

        vals = []
        for c in range(C_out):
            for ph in range(PH):
                h0, h1 = span(ph, bin_h, sy1, H)
                for pw in range(PW):
                    w0, w1 = span(pw, bin_w, sx1, W)
                    if h1 <= h0 or w1 <= w0:
                        vals.append(x.new_zeros(()))
                    else:
                        vals.append(x[b, (c * PH + ph) * PW + pw, h0:h1, w0:w1].sum() / ((h1 - h0) * (w1 - w0)))
        if vals:
            out = torch.stack(vals).reshape(C_out, PH, PW)
        rows.append(out)
    if not rows:
        return x.new_zeros(0, C_out, PH, PW)
    return torch.stack(rows)
