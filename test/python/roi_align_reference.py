"""Independent float64 reference for mmops::roi_align (mmcv RoIAlign semantics).

Written from the specification only (no mmops / torchvision calls). The result is
differentiable w.r.t. ``input`` through plain torch ops, so ``torch.autograd.grad``
on it gives the expected input gradient for both pool modes.
"""

import math

import torch

MAX_ADAPTIVE_GRID = 512


def axis_samples(start, roi_len, bins, grid, size):
    """Sample positions along one axis of R rois (start, roi_len: float64 [R]),
    shape [R, bins * grid] (bin-major), on start's device.

    Returns (valid, low, high, w_low, w_high): valid marks samples inside
    [-1, size]; the rest is the clamped bilinear neighbourhood on this axis.
    """
    dev = start.device
    p = torch.arange(bins, device=dev, dtype=torch.float64).repeat_interleave(grid)
    i = torch.arange(grid, device=dev, dtype=torch.float64).repeat(bins)
    bin_len = (roi_len / bins)[:, None]
    pos = start[:, None] + p * bin_len + (i + 0.5) * bin_len / grid
    return border_taps(pos, size)


def border_taps(pos, size):
    """mmcv's border-clamped bilinear taps along one axis of a map of `size`, for sample
    positions of any shape: (valid, low, high, w_low, w_high). valid marks positions
    inside [-1, size] (NaN is not); a position in (-1, 0) reads row 0, one at or past
    size - 1 the last row. Differentiable w.r.t. pos (offsets move the samples)."""
    valid = (pos >= -1) & (pos <= size)
    pos = torch.where(valid, pos, torch.zeros_like(pos))
    pos = torch.where(pos < 0, torch.zeros_like(pos), pos)
    low = pos.detach().floor()
    at_edge = low >= size - 1
    # indices as integers: in bfloat16, size - 1 itself may round up to size
    low_index = torch.where(at_edge, size - 1, low.long().clamp(min=0))
    high_index = torch.where(at_edge, low_index, low_index + 1)
    frac = torch.where(at_edge, torch.zeros_like(pos), pos - low)
    return valid, low_index, high_index, 1 - frac, frac


def _axis_samples(start, roi_len, bins, grid, size):
    """axis_samples of one roi (start, roi_len: floats): each [bins * grid]."""
    one = [torch.tensor([v], dtype=torch.float64) for v in (start, roi_len)]
    return tuple(t[0] for t in axis_samples(*one, bins, grid, size))


def _grid_size(sampling_ratio, roi_len, bins):
    if sampling_ratio > 0:
        return sampling_ratio
    return min(math.ceil(roi_len / bins), MAX_ADAPTIVE_GRID)


def roi_samples(feat, roi, output_size, spatial_scale, sampling_ratio, aligned):
    """Bilinear sample values of one roi on one image ``feat`` [C,H,W] (float64).

    Returns [C, oh, ow, gh*gw] with the samples of a bin in (iy, ix) row-major
    order (out-of-range samples are 0), or None when the bins have no samples.
    """
    oh, ow = output_size
    C, H, W = feat.shape
    off = 0.5 if aligned else 0.0
    x1, y1, x2, y2 = (v * spatial_scale - off for v in roi)
    roi_w, roi_h = x2 - x1, y2 - y1
    if not aligned:
        roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
    gh = _grid_size(sampling_ratio, roi_h, oh)
    gw = _grid_size(sampling_ratio, roi_w, ow)
    if gh <= 0 or gw <= 0:
        return None
    vy, yl, yh, wyl, wyh = _axis_samples(y1, roi_h, oh, gh, H)
    vx, xl, xh, wxl, wxh = _axis_samples(x1, roi_w, ow, gw, W)
    dev = feat.device
    val = 0
    for yi, wy in ((yl, wyl), (yh, wyh)):
        for xi, wx in ((xl, wxl), (xh, wxh)):
            w = (wy[:, None] * wx[None, :]).to(dev)
            val = val + w * feat[:, yi[:, None].to(dev), xi[None, :].to(dev)]
    mask = (vy[:, None] & vx[None, :]).to(dev)
    val = torch.where(mask, val, torch.zeros_like(val))
    return val.reshape(C, oh, gh, ow, gw).permute(0, 1, 3, 2, 4).reshape(C, oh, ow, gh * gw)


def _pair(output_size):
    return (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)


def roi_align_ref(input, rois, output_size, spatial_scale=1.0, sampling_ratio=0, pool_mode="avg", aligned=True):
    """Reference RoIAlign. input [N,C,H,W], rois [K,5]; returns float64 [K,C,oh,ow].

    Rois with a batch index outside [0, N) or non-finite coordinates give zeros.
    """
    assert pool_mode in ("avg", "max")
    oh, ow = _pair(output_size)
    x = input.to(torch.float64)
    r = rois.detach().to(torch.float64).cpu()
    N, C = x.shape[:2]
    outs = []
    for k in range(r.shape[0]):
        vals = r[k].tolist()
        ok = all(math.isfinite(v) for v in vals) and 0 <= int(vals[0]) < N
        val = roi_samples(x[int(vals[0])], vals[1:], (oh, ow), spatial_scale, sampling_ratio, aligned) if ok else None
        if val is None:
            outs.append(x.new_zeros(C, oh, ow))
        elif pool_mode == "avg":
            outs.append(val.sum(-1) / val.shape[-1])
        else:  # max: first maximum wins
            v = val.detach()
            idx = torch.arange(v.shape[-1], device=v.device).expand_as(v)
            first = torch.where(v == v.amax(-1, keepdim=True), idx, v.shape[-1])
            first = first.amin(-1, keepdim=True).clamp(max=v.shape[-1] - 1)  # NaN bins
            outs.append(val.gather(-1, first).squeeze(-1))
    if not outs:
        return x.new_zeros(0, C, oh, ow)
    return torch.stack(outs)


def roi_align_ref_grad(input, rois, grad_output, **kwargs):
    """Expected d(sum(out * grad_output))/d(input) from the reference (float64)."""
    with torch.enable_grad():
        x = input.detach().to(torch.float64).requires_grad_(True)
        out = roi_align_ref(x, rois, **kwargs)
        if not out.requires_grad:  # every roi pooled constant zeros
            return torch.zeros_like(x)
        (g,) = torch.autograd.grad(out, x, grad_output.detach().to(x.device, torch.float64), allow_unused=True)
    return torch.zeros_like(x) if g is None else g


def max_mode_margin(input, rois, output_size, spatial_scale=1.0, sampling_ratio=0, aligned=True):
    """Smallest gap between best and second-best sample value over all bins."""
    x = input.detach().to(torch.float64).cpu()
    margin = math.inf
    for vals in rois.detach().to(torch.float64).cpu().tolist():
        val = roi_samples(x[int(vals[0])], vals[1:], _pair(output_size), spatial_scale, sampling_ratio, aligned)
        if val is not None and val.shape[-1] > 1:
            top2 = val.topk(2, dim=-1).values
            margin = min(margin, (top2[..., 0] - top2[..., 1]).min().item())
    return margin
