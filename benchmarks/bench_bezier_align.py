"""Benchmark mmops.bezier_align against a plain-PyTorch composite in the same process: the
bin centres on the Bezier curves (Bernstein basis x control points), the sample grid around
them, F.grid_sample (bilinear, border padding, align_corners=True: mmcv's clamp of samples
in [-1, size]) per image, a mask zeroing samples outside and the mean over each bin's
samples; the geometry is part of both timings (the rois are data, as in a model).

Shapes: ABCNet's recognition branch (AdelaiDet BAText: BezierAlign output (8, 32),
sampling_ratio 1, 256 FPN channels, 800 x 1333 images, batch 2 per GPU shown) on P2
(200 x 334, scale 1/4) and P3 (100 x 167, scale 1/8), 256 rois; a sampling_ratio 2 case;
CPU: one 50 x 84 map of 16 channels, 32 rois. Rois: "text" (curved text lines: arcs of
15-75% of the map's width, 5-25% of its height high) or "random" (control points anywhere
in the map and 30% around it: crossing curves, no locality).

Every configuration is first checked: the output against the float64 composite (a slice
of 8 channels) and, on the CPU case, the float64 loop reference of the tests; the input
gradient against the float64 composite's backward on that slice; then forward and
forward+backward (torch.autograd.grad with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from bezier_align_reference import bezier_align_composite, bezier_align_ref, random_rois, text_rois

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
ROIS = ("text", "random")
# tolerance of the checks (relative to the largest value)
TOL = {"fp32": 1e-4, "fp16": 2e-2, "bf16": 6e-2}


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    channels: int
    height: int
    width: int
    rois: int
    spatial_scale: float
    sampling_ratio: int = 1
    out_h: int = 8
    out_w: int = 32


CUDA_CASES = [
    Case("abcnet_p2", 2, 256, 200, 334, 256, 0.25),
    Case("abcnet_p3", 2, 256, 100, 167, 256, 0.125),
    Case("p3_sr2", 2, 256, 100, 167, 256, 0.125, 2),
]
CPU_CASES = [Case("small", 1, 16, 50, 84, 32, 0.25)]


def bench_bezier_align(case, dtype_name, rois_kind, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    n, c, h, w, k = case.batch, case.channels, case.height, case.width, case.rois
    scale, sr, size = case.spatial_scale, case.sampling_ratio, (case.out_h, case.out_w)
    x = torch.randn(n, c, h, w, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    make = text_rois if rois_kind == "text" else random_rois
    rois = make(k, n, h, w, gen, spatial_scale=scale).to(device=device, dtype=dtype)
    go = torch.randn(k, c, *size, generator=gen).to(device=device, dtype=dtype)
    row = FwdBwdRow(("bezier_align", f"{n}x{c}x{h}x{w} K {k} sr {sr}", dtype_name, rois_kind))
    name = f"bezier_align/{case.name}/{dtype_name}/{rois_kind}"

    def mm(t):
        return torch.ops.mmops.bezier_align(t, rois, list(size), scale, sr, True)

    def base(t):
        return bezier_align_composite(t, rois, size, scale, sr, True)

    try:
        out = mm(x)
        (grad,) = torch.autograd.grad(out, x, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    # float64 composite on a channel slice of the same rounded values
    keep = min(c, 8)
    xs = x.detach()[:, :keep].double().requires_grad_(True)
    exp = bezier_align_composite(xs, rois.double(), size, scale, sr, True)
    (exp_grad,) = torch.autograd.grad(exp, xs, go[:, :keep].double())
    errs = [rel_err(out[:, :keep], exp)]
    if not run.cuda:  # the loop reference (slow in Python: the CPU case only)
        ref = bezier_align_ref(xs.detach().cpu(), rois.double().cpu(), size, scale, sr, True)
        errs.append(rel_err(out[:, :keep].cpu(), ref))
    errs.append(rel_err(grad[:, :keep], exp_grad))
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if any(e > TOL[dtype_name] for e in errs):
        row.check += " !"
        problems.append(f"{name}: rel err {row.check} (tolerance {TOL[dtype_name]:.0e})")
    del out, grad, exp, exp_grad
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x))
        row.base_fwd = timer(lambda: base(x))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x), x, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(x), x, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "bezier_align benchmark",
        iters=(30, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("rois", ROIS, ROIS, ROIS),
        ],
        bench=bench_bezier_align,
        labels=("op", "shape", "dtype", "rois"),
        baseline="grid_sample composite",
        check="rel err out vs f64 composite[/loop ref]/grad vs f64 composite",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
