"""float64 reference of prroi_pool (plain torch, no pytest), written independently of
the kernels' separable tent-weight form: the interpolated map is bilinear inside each
unit cell [i, i+1] x [j, j+1], so its integral over a rectangle inside that cell is the
rectangle's area times the value at the rectangle's centre. A bin's integral is the sum
of those pieces over the cells it overlaps. Built from torch ops, so autograd gives the
reference gradients of the input and of the roi coordinates."""

import math

import torch


def _f(t):
    """A 0-d tensor's value (no autograd)."""
    return float(t.detach())


def _value_at(plane, y, x):
    """Bilinear interpolation of plane [C, H, W] at (y, x) (0-d tensors), zeros outside."""
    C, H, W = plane.shape
    i0, j0 = math.floor(_f(y)), math.floor(_f(x))
    total = plane.new_zeros(C)
    for i in (i0, i0 + 1):
        for j in (j0, j0 + 1):
            if 0 <= i < H and 0 <= j < W:
                total = total + plane[:, i, j] * (1 - (y - i).abs()) * (1 - (x - j).abs())
    return total


def _bin_mean(plane, y1, x1, y2, x2):
    """Mean of the interpolated plane over [y1, y2] x [x1, x2] (0-d tensors, positive area)."""
    C = plane.shape[0]
    total = plane.new_zeros(C)
    for i in range(math.floor(_f(y1)), math.ceil(_f(y2))):
        lo_y, hi_y = torch.clamp(y1, min=i), torch.clamp(y2, max=i + 1)
        if _f(hi_y) <= _f(lo_y):
            continue
        for j in range(math.floor(_f(x1)), math.ceil(_f(x2))):
            lo_x, hi_x = torch.clamp(x1, min=j), torch.clamp(x2, max=j + 1)
            if _f(hi_x) <= _f(lo_x):
                continue
            centre = _value_at(plane, (lo_y + hi_y) / 2, (lo_x + hi_x) / 2)
            total = total + centre * (hi_y - lo_y) * (hi_x - lo_x)
    return total / ((y2 - y1) * (x2 - x1))


def prroi_pool_ref(x, rois, output_size, spatial_scale=1.0):
    """float64 [K, C, PH, PW]; differentiable w.r.t. x and rois[:, 1:] (float64 leaves)."""
    x, rois = x.double(), rois.double()
    N, C, H, W = x.shape
    PH, PW = output_size
    out = []
    for k in range(rois.shape[0]):
        b = int(rois[k, 0])
        x1, y1, x2, y2 = (rois[k, i] * spatial_scale for i in range(1, 5))
        if not all(math.isfinite(_f(v)) for v in (x1, y1, x2, y2)):
            out.append(x.new_full((C, PH, PW), math.nan))
            continue
        bin_w, bin_h = torch.clamp(x2 - x1, min=0) / PW, torch.clamp(y2 - y1, min=0) / PH
        if _f(bin_w) <= 0 or _f(bin_h) <= 0:
            out.append(x.new_zeros(C, PH, PW) * (x1 + y1 + x2 + y2))  # zeros, no gradient
            continue
        bins = []
        for ph in range(PH):
            for pw in range(PW):
                by1, bx1 = y1 + bin_h * ph, x1 + bin_w * pw
                bins.append(_bin_mean(x[b].double(), by1, bx1, by1 + bin_h, bx1 + bin_w))
        out.append(torch.stack(bins, 1).reshape(C, PH, PW))
    return torch.stack(out) if out else x.new_zeros(0, C, PH, PW, dtype=torch.float64)
