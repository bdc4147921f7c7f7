"""A float64 reference of mmcv's deform_roi_pool in plain torch (no pytest), shared by the
tests and the benchmark. Differentiable w.r.t. input and offset through torch's autograd,
which gives the reference gradients."""

import math

import torch
from roi_align_reference import MAX_ADAPTIVE_GRID as MAX_GRID
from roi_align_reference import border_taps  # mmcv's clamp rule, shared with roi_align


def _geometry_dtype(dtype):
    # the kernels compute geometry in float for float32/half/bfloat16, in double for double
    return torch.float64 if dtype == torch.float64 else torch.float32


def _grid(bin_size, sampling_ratio):
    if sampling_ratio > 0:
        return sampling_ratio
    n = math.ceil(bin_size) if math.isfinite(bin_size) else 0
    return min(max(n, 0), MAX_GRID)


def _roi(x, roi, off, out_size, scale, sampling_ratio, gamma, gdtype):
    """[C, PH, PW] of one roi (zeros when it pools nothing)."""
    N, C, H, W = x.shape
    PH, PW = out_size
    zeros = x.new_zeros(C, PH, PW)
    r = roi.to(gdtype)
    half = torch.tensor(0.5, dtype=gdtype)
    sx, sy, ex, ey = [r[i] * torch.tensor(scale, dtype=gdtype) - half for i in range(1, 5)]
    w_t, h_t = ex - sx, ey - sy  # in the kernel's geometry precision
    b = roi[0].item()
    if not all(math.isfinite(v.item()) for v in (sx, sy, ex, ey, w_t, h_t)) or not (0 <= b < N):
        return zeros
    gh = _grid((h_t / PH).item(), sampling_ratio)
    gw = _grid((w_t / PW).item(), sampling_ratio)
    if gh == 0 or gw == 0 or H == 0 or W == 0:
        return zeros + 0 * (off.sum() if off is not None else 0)
    sx, sy, roi_w, roi_h = sx.item(), sy.item(), w_t.item(), h_t.item()
    bin_h, bin_w = roi_h / PH, roi_w / PW
    dx = off[0] if off is not None else x.new_zeros(PH, PW)
    dy = off[1] if off is not None else x.new_zeros(PH, PW)
    ph = torch.arange(PH, dtype=torch.float64)[:, None, None]
    pw = torch.arange(PW, dtype=torch.float64)[None, :, None]
    iy = (torch.arange(gh, dtype=torch.float64) + 0.5) * bin_h / gh
    ix = (torch.arange(gw, dtype=torch.float64) + 0.5) * bin_w / gw
    y = (sy + gamma * roi_h * dy)[:, :, None] + ph * bin_h + iy  # [PH, PW, gh]
    xs = (sx + gamma * roi_w * dx)[:, :, None] + pw * bin_w + ix  # [PH, PW, gw]
    vy, y0, y1, wy0, wy1 = border_taps(y[..., :, None].expand(PH, PW, gh, gw), H)
    vx, x0, x1, wx0, wx1 = border_taps(xs[..., None, :].expand(PH, PW, gh, gw), W)
    img = x[int(b)]
    val = (
        wy0 * wx0 * img[:, y0, x0]
        + wy0 * wx1 * img[:, y0, x1]
        + wy1 * wx0 * img[:, y1, x0]
        + wy1 * wx1 * img[:, y1, x1]
    )
    val = torch.where(vy & vx, val, torch.zeros_like(val))
    return val.sum(dim=(-1, -2)) / (gh * gw)


def deform_roi_pool_reference(input, rois, offset, output_size, spatial_scale=1.0, sampling_ratio=0, gamma=0.1):
    """float64 [K, C, out_h, out_w]; autograd through it gives the input and offset gradients."""
    x = input.double()
    off = offset.double() if offset is not None else None
    gdtype = _geometry_dtype(input.dtype)
    scale = torch.tensor(spatial_scale, dtype=gdtype).item()
    out = [
        _roi(x, rois[k], off[k] if off is not None else None, output_size, scale, sampling_ratio, gamma, gdtype)
        for k in range(rois.shape[0])
    ]
    if not out:
        return x.new_zeros(0, x.shape[1], *output_size)
    return torch.stack(out)


def reference_with_grads(input, rois, offset, output_size, spatial_scale, sampling_ratio, gamma, grad_output):
    """(output, grad_input, grad_offset or None) of the reference, float64."""
    x = input.detach().double().requires_grad_(True)
    off = offset.detach().double().requires_grad_(True) if offset is not None else None
    out = deform_roi_pool_reference(x, rois, off, output_size, spatial_scale, sampling_ratio, gamma)
    inputs = [x] + ([off] if off is not None else [])
    grads = torch.autograd.grad(out, inputs, grad_output.double(), allow_unused=True)
    grads = [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, inputs)]
    return out.detach(), grads[0], (grads[1] if off is not None else None)


def deform_roi_pool_composite(input, rois, offset, output_size, spatial_scale, grid, gamma):
    """All rois at once in plain torch ops with a fixed grid x grid per bin (sampling_ratio =
    grid > 0), in input's dtype: the benchmark's baseline. Rows of an invalid batch index or
    box are not handled (benchmark inputs have none)."""
    N, C, H, W = input.shape
    K = rois.shape[0]
    PH, PW = output_size
    dt = input.dtype
    b = rois[:, 0].long()
    sx, sy = rois[:, 1] * spatial_scale - 0.5, rois[:, 2] * spatial_scale - 0.5
    roi_w, roi_h = rois[:, 3] * spatial_scale - 0.5 - sx, rois[:, 4] * spatial_scale - 0.5 - sy
    bin_w, bin_h = roi_w / PW, roi_h / PH
    dx = offset[:, 0] if offset is not None else rois.new_zeros(K, PH, PW)
    dy = offset[:, 1] if offset is not None else rois.new_zeros(K, PH, PW)
    frac = (torch.arange(grid, device=input.device, dtype=dt) + 0.5) / grid
    ph = torch.arange(PH, device=input.device, dtype=dt)
    pw = torch.arange(PW, device=input.device, dtype=dt)
    y0 = (sy[:, None, None] + gamma * roi_h[:, None, None] * dy) + ph[None, :, None] * bin_h[:, None, None]
    x0 = (sx[:, None, None] + gamma * roi_w[:, None, None] * dx) + pw[None, None, :] * bin_w[:, None, None]
    # [K, PH, PW, G, G]
    y = y0[..., None, None] + (frac[:, None] * bin_h[:, None, None, None, None])
    x = x0[..., None, None] + (frac[None, :] * bin_w[:, None, None, None, None])
    y, x = torch.broadcast_tensors(y, x)
    vy, ylo, yhi, wy0, wy1 = border_taps(y, H)
    vx, xlo, xhi, wx0, wx1 = border_taps(x, W)
    mask = (vy & vx).to(dt)
    pixels = input.permute(0, 2, 3, 1).reshape(N * H * W, C)
    base = (b * H * W)[:, None, None, None, None]

    def tap(yi, xi):
        return pixels.index_select(0, (base + yi * W + xi).reshape(-1)).reshape(*y.shape, C)

    val = (
        (wy0 * wx0 * mask)[..., None] * tap(ylo, xlo)
        + (wy0 * wx1 * mask)[..., None] * tap(ylo, xhi)
        + (wy1 * wx0 * mask)[..., None] * tap(yhi, xlo)
        + (wy1 * wx1 * mask)[..., None] * tap(yhi, xhi)
    )
    return val.mean(dim=(3, 4)).permute(0, 3, 1, 2)
