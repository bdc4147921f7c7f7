"""Benchmark mmops.roi_align_rotated and mmops.riroi_align_rotated against a plain-PyTorch
composite written here (a gather: the rotated sample grid of every bin, mmcv's bilinear
border rule, one index per tap; riroi adds a gather of the shifted orientation channels),
in the same process. torchvision has no rotated RoIAlign (as of 0.26): no torchvision column.

Cases (CUDA): roi_align_rotated on 2x256x200x336 at 1/4 with 1024 rois 7x7, rois uniform
(centres over the image, sides up to half of it, any angle) or clustered (boxes of 8 to
48 px around 8 centres); riroi_align_rotated on 2x256x100x168 at 1/8 (32 groups of 8
orientations), 1024 uniform rois 7x7. CPU: smaller shapes. Options: dtypes, layouts
(NCHW or channels_last input), sampling ratios (2: the composite can take it; 0:
adaptive, checked against the float64 reference on the first rois, mmops timed only).
Every configuration is checked first: sampling ratio 2 against the composite in float32
on the same rounded values (relative error of output and input gradient), 0 against the
float64 reference of test/python/roi_align_rotated_reference.py. Then forward and
forward+backward (torch.autograd.grad with a fixed output gradient) are timed.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
from bench_common import LAYOUT_OPTION, LAYOUTS, FwdBwdRow, ListOption, benchmark_main, rel_err
from roi_align_rotated_reference import riroi_align_rotated_ref, roi_align_rotated_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
RATIOS = {"2": 2, "0": 0}
ORIENTATIONS = 8
REFERENCE_ROIS = 8  # rois checked against the float64 reference (adaptive rows)


@dataclass(frozen=True)
class Case:
    name: str
    op: str  # "roi_align_rotated" or "riroi_align_rotated"
    shape: tuple  # N, C, H, W of the feature map
    spatial_scale: float
    num_rois: int
    rois: str  # "uniform" or "clustered"
    output_size: int = 7


CUDA_CASES = [
    Case(f"rotated_{d}", "roi_align_rotated", (2, 256, 200, 336), 1 / 4, 1024, d) for d in ("uniform", "clustered")
] + [Case("riroi_uniform", "riroi_align_rotated", (2, 256, 100, 168), 1 / 8, 1024, "uniform")]
CPU_CASES = [
    Case(f"rotated_{d}", "roi_align_rotated", (1, 32, 50, 84), 1 / 4, 128, d) for d in ("uniform", "clustered")
] + [Case("riroi_uniform", "riroi_align_rotated", (1, 32, 50, 84), 1 / 8, 128, "uniform")]


def make_rois(case, seed=0):
    """float32 CPU rotated rois (batch, cx, cy, w, h, theta) in image coordinates."""
    gen = torch.Generator().manual_seed(seed)
    n, _, h, w = case.shape
    img_h, img_w, k = h / case.spatial_scale, w / case.spatial_scale, case.num_rois
    b = torch.randint(0, n, (k,), generator=gen).float()
    if case.rois == "uniform":
        cx = torch.rand(k, generator=gen) * img_w
        cy = torch.rand(k, generator=gen) * img_h
        bw = torch.rand(k, generator=gen) * img_w / 2
        bh = torch.rand(k, generator=gen) * img_h / 2
    else:
        centres = torch.rand(8, 2, generator=gen) * torch.tensor([img_w, img_h])
        pick = torch.randint(0, 8, (k,), generator=gen)
        jitter = torch.randn(k, 2, generator=gen) * 16
        cx, cy = centres[pick, 0] + jitter[:, 0], centres[pick, 1] + jitter[:, 1]
        bw = 8 + torch.rand(k, generator=gen) * 40
        bh = 8 + torch.rand(k, generator=gen) * 40
    theta = (torch.rand(k, generator=gen) * 2 - 1) * math.pi
    return torch.stack([b, cx, cy, bw, bh, theta], 1)


def _taps(coord, size):
    """mmcv's border rule on one axis: (lo, hi, w_lo, w_hi, valid) of coordinates `coord`."""
    valid = (coord >= -1) & (coord <= size)
    c = coord.clamp(min=0)
    lo = c.floor().clamp(max=size - 1)
    edge = lo >= size - 1
    c = torch.where(edge, lo, c)
    hi = torch.where(edge, lo, lo + 1)
    frac = c - lo
    return lo.long(), hi.long(), 1 - frac, frac, valid


def rotated_composite(x, rois, size, scale, ratio, aligned, clamp_size, clockwise):
    """[K, C, size, size] of rotated RoIAlign in plain PyTorch (fixed sampling ratio): the
    sample coordinates of every bin, then one gather per bilinear tap from a channels-last view."""
    n, c, h, w = x.shape
    k = rois.shape[0]
    r = rois.float()
    offset = 0.5 if aligned else 0.0
    cx, cy = r[:, 1] * scale - offset, r[:, 2] * scale - offset
    rw, rh = r[:, 3] * scale, r[:, 4] * scale
    if clamp_size:
        rw, rh = rw.clamp(min=1), rh.clamp(min=1)
    theta = -r[:, 5] if clockwise else r[:, 5]
    steps = torch.arange(size, device=x.device)[:, None] + (torch.arange(ratio, device=x.device)[None] + 0.5) / ratio
    steps = steps.reshape(-1).float()  # [size * ratio] in bin units
    yy = -rh[:, None] / 2 + steps[None] * (rh / size)[:, None]  # [K, S]
    xx = -rw[:, None] / 2 + steps[None] * (rw / size)[:, None]
    cos, sin = theta.cos()[:, None, None], theta.sin()[:, None, None]
    y = yy[:, :, None] * cos - xx[:, None, :] * sin + cy[:, None, None]  # [K, S, S]
    xs = yy[:, :, None] * sin + xx[:, None, :] * cos + cx[:, None, None]
    y_lo, y_hi, wy_lo, wy_hi, vy = _taps(y, h)
    x_lo, x_hi, wx_lo, wx_hi, vx = _taps(xs, w)
    valid = (vy & vx).to(x.dtype)
    base = (r[:, 0].long() * h)[:, None, None]
    flat = x.permute(0, 2, 3, 1).reshape(n * h * w, c)
    out = 0
    for yi, wy in ((y_lo, wy_lo), (y_hi, wy_hi)):
        for xi, wx in ((x_lo, wx_lo), (x_hi, wx_hi)):
            index = ((base + yi) * w + xi).reshape(-1)
            weight = (wy * wx).to(x.dtype) * valid
            out = out + flat[index].reshape(k, y.shape[1], y.shape[2], c) * weight[..., None]
    out = out.reshape(k, size, ratio, size, ratio, c).mean(dim=(2, 4))  # [K, size, size, C]
    return out.permute(0, 3, 1, 2)


def riroi_composite(x, rois, size, scale, ratio, clockwise):
    """riroi_align_rotated in plain PyTorch: the rotated bins of every channel, then each
    output orientation blends the two shifted source orientations of its group."""
    pooled = rotated_composite(x, rois, size, scale, ratio, False, True, clockwise)
    k, c = pooled.shape[:2]
    position = rois[:, 5].float() * ORIENTATIONS / (2 * math.pi)
    shift = position.floor()
    frac = (position - shift).to(x.dtype)[:, None, None, None]
    co = torch.arange(c, device=x.device)
    group, o = co // ORIENTATIONS, co % ORIENTATIONS
    rot = (o[None] - shift.long()[:, None]) % ORIENTATIONS
    lo = (group[None] * ORIENTATIONS + rot)[..., None, None].expand(k, c, size, size)
    hi = (group[None] * ORIENTATIONS + (rot + 1) % ORIENTATIONS)[..., None, None].expand(k, c, size, size)
    return (1 - frac) * pooled.gather(1, lo) + frac * pooled.gather(1, hi)


def _ops(case, size, scale, ratio):
    """(mmops, composite, float64 reference), each f(x, rois)."""
    if case.op == "roi_align_rotated":

        def mm(x, r):
            return torch.ops.mmops.roi_align_rotated(x, r, [size, size], scale, ratio, True, False)

        def composite(x, r):
            return rotated_composite(x, r, size, scale, ratio, True, False, False)

        def reference(x, r):
            return roi_align_rotated_ref(x, r, (size, size), scale, ratio, True, False)

    else:

        def mm(x, r):
            return torch.ops.mmops.riroi_align_rotated(x, r, [size, size], scale, ratio, ORIENTATIONS, False)

        def composite(x, r):
            return riroi_composite(x, r, size, scale, ratio, False)

        def reference(x, r):
            return riroi_align_rotated_ref(x, r, (size, size), scale, ratio, ORIENTATIONS, False)

    return mm, composite, reference


def _check(mm, composite, reference, x, r, go, ratio):
    """Relative errors (output, input gradient) of mmops against the composite (fixed
    ratio; float32 on the same rounded values) or the float64 reference (first rois)."""
    if ratio > 0:
        ref_fn, xr = composite, x.detach().float().requires_grad_(True)
    else:  # the reference's per-roi loop is slow: the first rois only
        r, go = r[:REFERENCE_ROIS], go[:REFERENCE_ROIS]
        ref_fn, xr = reference, x.detach().double().cpu().requires_grad_(True)
    out = mm(x, r)
    (g,) = torch.autograd.grad(out, x, go)
    ref = ref_fn(xr, r.to(xr.device, xr.dtype))
    (gref,) = torch.autograd.grad(ref, xr, go.to(xr.device, xr.dtype))
    return [rel_err(out.cpu(), ref.cpu()), rel_err(g.cpu(), gref.cpu())]


def bench(case, dtype_name, layout_name, ratio_name, run, timer, problems):
    device, dtype, ratio = run.device, DTYPES[dtype_name], RATIOS[ratio_name]
    gen = torch.Generator().manual_seed(1)
    n, c, _, _ = case.shape
    size, scale, k = case.output_size, case.spatial_scale, case.num_rois
    x = torch.randn(case.shape, generator=gen).to(device=device, dtype=dtype)
    x = x.contiguous(memory_format=LAYOUTS[layout_name]).requires_grad_(True)
    r = make_rois(case).to(device=device, dtype=dtype)
    go = torch.randn(k, c, size, size, generator=gen).to(device=device, dtype=dtype)
    label = f"{'x'.join(map(str, case.shape))} 1/{round(1 / scale)}, {k} {case.rois}, {size}x{size}"
    row = FwdBwdRow((case.op, label, dtype_name, layout_name, ratio_name))
    mm, composite, reference = _ops(case, size, scale, ratio)
    # float32: sample coordinates of ~200 px round at ~1e-5 px
    tol = 5e-5 if dtype == torch.float32 else 2e-2
    try:
        errs = _check(mm, composite, reference, x, r, go, ratio)
    except Exception as exc:  # noqa: BLE001  (reported, the row is marked)
        row.check = "ERROR"
        problems.append(f"{case.name}/{dtype_name}/{layout_name}/{ratio_name}: mmops raised {exc}")
        return row
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if max(errs) > tol:
        row.check += " !"
        problems.append(f"{case.name}/{dtype_name}/{layout_name}/{ratio_name}: rel errs {errs} (tol {tol:.0e})")
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x, r))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x, r), x, go))
    if ratio > 0:
        try:
            with torch.no_grad():
                row.base_fwd = timer(lambda: composite(x, r))
            row.base_fb = timer(lambda: torch.autograd.grad(composite(x, r), x, go))
        except torch.OutOfMemoryError:
            problems.append(f"{case.name}/{dtype_name}: the composite ran out of memory (not timed)")
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "roi_align_rotated benchmark",
        iters=(50, 3),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            LAYOUT_OPTION,
            ListOption("ratios", RATIOS, list(RATIOS), list(RATIOS)),
        ],
        bench=bench,
        labels=("op", "shape", "dtype", "layout", "ratio"),
        baseline="composite",
        check="rel err out/grad",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
