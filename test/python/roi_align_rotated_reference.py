"""float64 references of roi_align_rotated and riroi_align_rotated in plain torch (no pytest),
written from mmcv's description: a rotated sampling grid per bin and bilinear sampling by hand
with mmcv's border rule. Differentiable w.r.t. the input through autograd (the gradient
reference). Shared by the tests and the benchmark."""

import math

import torch


def _bilinear(plane, y, x):
    """mmcv's bilinear_interpolate of plane [C, H, W] at coordinates y, x (any shape S):
    [C, *S]. Outside [-1, H] x [-1, W] a sample is 0; below 0 it clamps to 0; at or past
    size - 1 both neighbours are the last pixel."""
    C, H, W = plane.shape
    valid = (y >= -1) & (y <= H) & (x >= -1) & (x <= W)
    y = y.clamp(min=0)
    x = x.clamp(min=0)
    y_lo = y.floor().long()
    x_lo = x.floor().long()
    y_edge = y_lo >= H - 1
    x_edge = x_lo >= W - 1
    y_lo = torch.where(y_edge, torch.full_like(y_lo, H - 1), y_lo)
    x_lo = torch.where(x_edge, torch.full_like(x_lo, W - 1), x_lo)
    y = torch.where(y_edge, y_lo.to(y.dtype), y)
    x = torch.where(x_edge, x_lo.to(x.dtype), x)
    y_hi = torch.where(y_edge, y_lo, y_lo + 1)
    x_hi = torch.where(x_edge, x_lo, x_lo + 1)
    ly, lx = y - y_lo, x - x_lo
    hy, hx = 1 - ly, 1 - lx
    if H == 0 or W == 0:
        return plane.new_zeros(C, *y.shape)

    def at(yi, xi):
        return plane[:, yi.clamp(0, H - 1), xi.clamp(0, W - 1)]

    value = hy * hx * at(y_lo, x_lo) + hy * lx * at(y_lo, x_hi) + ly * hx * at(y_hi, x_lo) + ly * lx * at(y_hi, x_hi)
    return value * valid


def _bin_means(image, roi, out_size, scale, sampling_ratio, aligned, clamp_size, clockwise):
    """[C, PH, PW]: the average of each rotated bin's samples of image [C, H, W]."""
    PH, PW = out_size
    _, cx, cy, w, h, theta = [float(v) for v in roi]
    offset = 0.5 if aligned else 0.0
    cx, cy, w, h = cx * scale - offset, cy * scale - offset, w * scale, h * scale
    if clamp_size:
        w, h = max(w, 1.0), max(h, 1.0)
    if clockwise:
        theta = -theta
    gh = sampling_ratio if sampling_ratio > 0 else math.ceil(h / PH)
    gw = sampling_ratio if sampling_ratio > 0 else math.ceil(w / PW)
    if gh <= 0 or gw <= 0:
        return image.new_zeros(image.shape[0], PH, PW)
    bin_h, bin_w = h / PH, w / PW
    f64 = dict(dtype=torch.float64)
    yy = -h / 2 + torch.arange(PH, **f64)[:, None] * bin_h + (torch.arange(gh, **f64)[None] + 0.5) * bin_h / gh
    xx = -w / 2 + torch.arange(PW, **f64)[:, None] * bin_w + (torch.arange(gw, **f64)[None] + 0.5) * bin_w / gw
    yy = yy[:, None, :, None]  # [PH, 1, gh, 1]
    xx = xx[None, :, None, :]  # [1, PW, 1, gw]
    c, s = math.cos(theta), math.sin(theta)
    y = yy * c - xx * s + cy
    x = yy * s + xx * c + cx
    return _bilinear(image, y, x).mean(dim=(3, 4))


def _batch(roi, N):
    b = float(roi[0])
    return int(b) if 0 <= b < N else None


def roi_align_rotated_ref(x, rois, out_size, spatial_scale=1.0, sampling_ratio=0, aligned=True, clockwise=False):
    """float64 [K, C, PH, PW] of mmcv's roi_align_rotated (differentiable w.r.t. x)."""
    xd = x.double()
    N, C = xd.shape[:2]
    outs = []
    for roi in rois.double():
        b = _batch(roi, N)
        if b is None:
            outs.append(xd.new_zeros(C, *out_size))
            continue
        outs.append(_bin_means(xd[b], roi, out_size, spatial_scale, sampling_ratio, aligned, not aligned, clockwise))
    return torch.stack(outs) if outs else xd.new_zeros(0, C, *out_size)


def riroi_align_rotated_ref(x, rois, out_size, spatial_scale=1.0, num_samples=0, num_orientations=8, clockwise=False):
    """float64 [K, C, PH, PW] of mmcv's riroi_align_rotated (differentiable w.r.t. x)."""
    xd = x.double()
    N, C = xd.shape[:2]
    O = num_orientations
    outs = []
    for roi in rois.double():
        b = _batch(roi, N)
        if b is None:
            outs.append(xd.new_zeros(C, *out_size))
            continue
        means = _bin_means(xd[b], roi, out_size, spatial_scale, num_samples, False, True, clockwise)
        position = float(roi[5]) * O / (2 * math.pi)
        shift = math.floor(position)
        frac = position - shift
        co = torch.arange(C)
        group, o = co // O, co % O
        rot = (o - shift) % O
        lo = group * O + rot
        hi = group * O + (rot + 1) % O
        outs.append((1 - frac) * means[lo] + frac * means[hi])
    return torch.stack(outs) if outs else xd.new_zeros(0, C, *out_size)
