"""float64 reference of mmops::rotated_feature_align in plain torch (mmcv's rules),
shared by the tests and the benchmark. Differentiable w.r.t. features."""

import torch


def _axis(coord, size):
    """mmcv's border-clamped bilinear rule along one axis: (lo, hi, w_lo, w_hi, valid)."""
    valid = (coord >= -1) & (coord <= size)  # NaN: False
    c = torch.where(valid, coord, torch.zeros_like(coord)).clamp(min=0)
    lo = c.floor()
    last = lo >= size - 1
    lo = torch.where(last, torch.full_like(lo, size - 1), lo)
    hi = torch.where(last, lo, lo + 1)
    c = torch.where(last, lo, c)
    frac = c - lo
    return lo.long(), hi.long(), 1 - frac, frac, valid


def sample(x, y, xx):
    """x [N, C, H, W] float64, y / xx [N, H, W] rows / columns -> [N, C, H, W] samples."""
    N, C, H, W = x.shape
    ylo, yhi, wy0, wy1, vy = _axis(y, H)
    xlo, xhi, wx0, wx1, vx = _axis(xx, W)
    valid = (vy & vx).to(x.dtype)
    n = torch.arange(N).view(N, 1, 1).expand_as(ylo)
    xl = x.permute(0, 2, 3, 1)  # [N, H, W, C]
    out = (
        (wy0 * wx0)[..., None] * xl[n, ylo, xlo]
        + (wy0 * wx1)[..., None] * xl[n, ylo, xhi]
        + (wy1 * wx0)[..., None] * xl[n, yhi, xlo]
        + (wy1 * wx1)[..., None] * xl[n, yhi, xhi]
    )
    return (out * valid[..., None]).permute(0, 3, 1, 2)


def points_of(boxes, spatial_scale, points):
    """[(rows, columns)] of the sample points of [N, H, W, 5] boxes (mmcv's layout)."""
    b = boxes.double()
    cy, cx = b[..., 0] * spatial_scale, b[..., 1] * spatial_scale
    out = [(cy, cx)]
    if points == 5:
        hw, hh, a = b[..., 2] * spatial_scale / 2, b[..., 3] * spatial_scale / 2, b[..., 4]
        wx, wy = torch.cos(a) * hw, torch.sin(a) * hw
        hx, hy = -torch.sin(a) * hh, torch.cos(a) * hh
        for sx, sy in ((1, 1), (-1, 1), (-1, -1), (1, -1)):
            # corners: centre + sx * (w vector) + sy * (h vector)
            out.append((cy + sx * wy + sy * hy, cx + sx * wx + sy * hx))
    return out


def rotated_feature_align_ref(features, boxes, spatial_scale=1 / 8, points=1):
    """float64 features + the samples at each pixel's box points."""
    x = features.double()
    out = x
    for y, xx in points_of(boxes, spatial_scale, points):
        out = out + sample(x, y, xx)
    return out
