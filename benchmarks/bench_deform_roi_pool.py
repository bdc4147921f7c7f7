"""Benchmark mmops.deform_roi_pool against a plain-PyTorch composite and, without offset,
against mmops.roi_align (aligned, avg: the same pooling), in the same process.

Cases: FPN-level-like maps (CUDA: 2x256x200x336 at 1/4 and 2x256x50x84 at 1/16; CPU:
1x64x100x168 at 1/4), 512 and 2000 rois, C 256, 7x7 bins; rois uniform (sides up to half
the image) or clustered (small boxes of 8 to 48 pixels around 8 centres). Options: dtypes,
offset (random offsets, or none), sampling ratio (2: the composite can take it; 0: adaptive,
compared with roi_align only). Every configuration is checked first against the composite
in float32 on the same rounded values (2 only; relative error 1e-5 for float32, 2e-2 for
16-bit dtypes) or against roi_align (no offset). Then forward and forward+backward
(torch.autograd.grad of input and offset with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, fmt_ms, fmt_ratio, rel_err
from deform_roi_pool_reference import deform_roi_pool_composite

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
OFFSETS = {"offset": True, "none": False}
RATIOS = {"2": 2, "0": 0}
GAMMA = 0.1


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple  # N, C, H, W of the feature map
    spatial_scale: float
    num_rois: int
    rois: str  # "uniform" or "clustered"
    output_size: int = 7


CUDA_CASES = [
    Case(f"{level}_{k}_{dist}", shape, scale, k, dist)
    for level, shape, scale in (("p2", (2, 256, 200, 336), 1 / 4), ("p4", (2, 256, 50, 84), 1 / 16))
    for k in (512, 2000)
    for dist in ("uniform", "clustered")
]
CPU_CASES = [Case(f"p2_512_{d}", (1, 64, 100, 168), 1 / 4, 512, d) for d in ("uniform", "clustered")]


def make_rois(case, seed=0):
    """float32 CPU rois in image coordinates ((H, W) / spatial_scale)."""
    gen = torch.Generator().manual_seed(seed)
    n, _, h, w = case.shape
    img_h, img_w, k = h / case.spatial_scale, w / case.spatial_scale, case.num_rois
    b = torch.randint(0, n, (k,), generator=gen).float()
    if case.rois == "uniform":
        x1 = torch.rand(k, generator=gen) * img_w
        y1 = torch.rand(k, generator=gen) * img_h
        bw = torch.rand(k, generator=gen) * img_w / 2
        bh = torch.rand(k, generator=gen) * img_h / 2
    else:
        centres = torch.rand(8, 2, generator=gen) * torch.tensor([img_w, img_h])
        pick = torch.randint(0, 8, (k,), generator=gen)
        jitter = torch.randn(k, 2, generator=gen) * 16
        bw = 8 + torch.rand(k, generator=gen) * 40
        bh = 8 + torch.rand(k, generator=gen) * 40
        x1 = (centres[pick, 0] + jitter[:, 0] - bw / 2).clamp(0, img_w - 1)
        y1 = (centres[pick, 1] + jitter[:, 1] - bh / 2).clamp(0, img_h - 1)
    x2, y2 = torch.clamp(x1 + bw, max=img_w), torch.clamp(y1 + bh, max=img_h)
    return torch.stack([b, x1, y1, x2, y2], 1)


def _grads(fn, x, off, go):
    inputs = (x, off) if off is not None else (x,)
    return torch.autograd.grad(fn(x, off), inputs, go)


def bench(case, dtype_name, offset_name, ratio_name, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    ratio, with_offset = RATIOS[ratio_name], OFFSETS[offset_name]
    gen = torch.Generator().manual_seed(1)
    n, c, _, _ = case.shape
    size, scale, k = case.output_size, case.spatial_scale, case.num_rois
    x = torch.randn(case.shape, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    r = make_rois(case).to(device=device, dtype=dtype)
    off = None
    if with_offset:
        off = torch.randn(k, 2, size, size, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    go = torch.randn(k, c, size, size, generator=gen).to(device=device, dtype=dtype)
    label = f"{'x'.join(map(str, case.shape))} 1/{round(1 / scale)}, {k} {case.rois}, {size}x{size}"
    row = FwdBwdRow(("deform_roi_pool", label, dtype_name, offset_name, ratio_name))

    def mm(x, off):
        return torch.ops.mmops.deform_roi_pool(x, r, off, [size, size], scale, ratio, GAMMA)

    def composite(x, off):
        return deform_roi_pool_composite(x, r, off, (size, size), scale, ratio, GAMMA)

    def roi_align(x, off):
        return torch.ops.mmops.roi_align(x, r, [size, size], scale, ratio, "avg", True)

    try:
        out, grads = mm(x, off), _grads(mm, x, off, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{case.name}/{dtype_name}/{offset_name}/{ratio_name}: mmops raised {exc}")
        return row
    ref_fn = composite if ratio > 0 else (roi_align if not with_offset else None)
    if ref_fn is not None:
        # reference in float32 on the same rounded values
        xf = x.detach().float().requires_grad_(True)
        of = off.detach().float().requires_grad_(True) if off is not None else None
        rf = r.float()
        ref = deform_roi_pool_composite(xf, rf, of, (size, size), scale, ratio, GAMMA) if ratio > 0 else None
        if ref is None:
            ref = torch.ops.mmops.roi_align(xf, rf, [size, size], scale, ratio, "avg", True)
        ref_grads = torch.autograd.grad(ref, (xf, of) if of is not None else (xf,), go.float())
        errs = [rel_err(out, ref)] + [rel_err(g, rg) for g, rg in zip(grads, ref_grads)]
        # float32: the sample coordinates (~200 px) round at ~1e-5 px, which moves
        # a bilinear value by that much relative to the features' slope
        tol = 5e-5 if dtype == torch.float32 else 2e-2
        row.check = "/".join(f"{e:.0e}" for e in errs)
        if max(errs) > tol:
            row.check += " !"
            problems.append(f"{case.name}/{dtype_name}/{offset_name}/{ratio_name}: rel errs {errs} (tol {tol:.0e})")
    del out, grads
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x, off))
    row.mm_fb = timer(lambda: _grads(mm, x, off, go))
    if ratio > 0:
        try:
            with torch.no_grad():
                row.base_fwd = timer(lambda: composite(x, off))
            row.base_fb = timer(lambda: _grads(composite, x, off, go))
        except torch.OutOfMemoryError:
            problems.append(f"{case.name}/{dtype_name}: the composite ran out of memory (not timed)")
    if not with_offset:
        with torch.no_grad():
            row.extra["roi_align_fwd"] = timer(lambda: roi_align(x, None))
        row.extra["roi_align_fb"] = timer(lambda: _grads(roi_align, x, None, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "deform_roi_pool benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("offsets", OFFSETS, list(OFFSETS), list(OFFSETS)),
            ListOption("ratios", RATIOS, list(RATIOS), ["2"]),
        ],
        bench=bench,
        labels=("op", "shape", "dtype", "offset", "ratio"),
        baseline="composite",
        check="rel err out/grads",
        after=[
            ("roi_align fwd ms", lambda r: fmt_ms(r.extra.get("roi_align_fwd"))),
            ("ratio", lambda r: fmt_ratio(r.extra.get("roi_align_fwd"), r.mm_fwd)),
            ("roi_align fwd+bwd ms", lambda r: fmt_ms(r.extra.get("roi_align_fb"))),
            ("ratio", lambda r: fmt_ratio(r.extra.get("roi_align_fb"), r.mm_fb)),
        ],
        with_torchvision=False,
        extra_baselines=[("roi_align", "roi_align_fwd", "roi_align_fb")],
    )


if __name__ == "__main__":
    sys.exit(main())
