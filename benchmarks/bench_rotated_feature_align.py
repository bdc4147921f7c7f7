"""Benchmark mmops.rotated_feature_align against a plain-PyTorch composite
(per point: mmcv's sample coordinates clamped to the map, F.grid_sample with
align_corners=True and border padding, times the in-range mask; plus the
features), in the same process.

S2A-Net / R3Det refinement shapes: batch 2, C 256, the FPN maps of strides 8 to 128
of a 1024x1024 image (128x128 ... 8x8; CUDA); CPU: C 32, strides 32 and 64.
points 1 (centre) and 5 (centre and corners), spatial_scale = 1 / stride. Boxes from
two distributions: "uniform" (centres anywhere in the image, sizes 8..256 px, any
angle) and "clustered" (each box near its own pixel, as refined anchors are: the
pixel centre plus N(0, stride) px, sizes 16..64 px). Every configuration is first
checked against the float64 reference of the tests on the same (rounded) values:
output and features gradient, relative error at most 1e-5 (float32) or 2e-2
(16-bit). Then forward and forward+backward (torch.autograd.grad with a fixed
output gradient) are timed. --layouts channels_last puts the features and the output
gradient in channels-last order (default: contiguous only).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from bench_common import LAYOUTS, FwdBwdRow, ListOption, benchmark_main, rel_err
from rotated_feature_align_reference import points_of, rotated_feature_align_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DISTRIBUTIONS = ("uniform", "clustered")
POINTS = {"1": 1, "5": 5}
IMAGE = 1024


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    channels: int
    stride: int

    @property
    def size(self) -> int:
        return IMAGE // self.stride


CUDA_CASES = [Case(f"s{s}", 2, 256, s) for s in (8, 16, 32, 64, 128)]
CPU_CASES = [Case(f"s{s}", 2, 32, s) for s in (32, 64)]


def rboxes(case, distribution, gen):
    """[N, H, W, 5] boxes in image pixels, mmcv's layout (row, column, w, h, angle)."""
    n, s = case.batch, case.size
    r = torch.rand(n, s, s, 5, generator=gen, dtype=torch.float64)
    if distribution == "uniform":
        rows, cols = r[..., 0] * IMAGE, r[..., 1] * IMAGE
        w, h = 8 + r[..., 2] * 248, 8 + r[..., 3] * 248
    else:
        grid = (torch.arange(s, dtype=torch.float64) + 0.5) * case.stride
        noise = torch.randn(n, s, s, 2, generator=gen, dtype=torch.float64) * case.stride
        rows, cols = grid.view(1, s, 1) + noise[..., 0], grid.view(1, 1, s) + noise[..., 1]
        w, h = 16 + r[..., 2] * 48, 16 + r[..., 3] * 48
    a = (r[..., 4] * 2 - 1) * math.pi
    return torch.stack([rows, cols, w, h, a], -1)


def composite(features, boxes, spatial_scale, points):
    """features + sum over points of grid_sample at mmcv's clamped coordinates (in range only)."""
    n, c, h, w = features.shape
    out = features
    for y, x in points_of(boxes, spatial_scale, points):
        valid = (y >= -1) & (y <= h) & (x >= -1) & (x <= w)
        yc, xc = y.clamp(0, h - 1), x.clamp(0, w - 1)
        grid = torch.stack([xc / max(w - 1, 1) * 2 - 1, yc / max(h - 1, 1) * 2 - 1], -1).to(features.dtype)
        s = F.grid_sample(features, grid, mode="bilinear", padding_mode="border", align_corners=True)
        out = out + s * valid.unsqueeze(1).to(features.dtype)
    return out


def bench_rfa(case, dtype_name, distribution, points_name, layout_name, run, timer, problems):
    device, dtype, points = run.device, DTYPES[dtype_name], POINTS[points_name]
    fmt = LAYOUTS[layout_name]
    gen = torch.Generator().manual_seed(0)
    n, c, s = case.batch, case.channels, case.size
    scale = 1.0 / case.stride
    f = torch.randn(n, c, s, s, generator=gen).to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    f.requires_grad_(True)
    boxes = rboxes(case, distribution, gen).to(device=device, dtype=dtype)
    go = torch.randn(n, c, s, s, generator=gen).to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    cl = " cl" if fmt == torch.channels_last else ""
    row = FwdBwdRow(("rotated_feature_align", f"{n}x{c}x{s}x{s} p{points}{cl}", dtype_name, distribution))
    name = f"rotated_feature_align/{case.name}/{dtype_name}/{distribution}/p{points}/{layout_name}"

    def mm(x):
        return torch.ops.mmops.rotated_feature_align(x, boxes, scale, points)

    def base(x):
        return composite(x, boxes, scale, points)

    try:
        out = mm(f)
        (grad,) = torch.autograd.grad(out, f, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    fr = f.detach().double().cpu().requires_grad_(True)
    ref = rotated_feature_align_ref(fr, boxes.cpu(), scale, points)
    (ref_grad,) = torch.autograd.grad(ref, fr, go.double().cpu())
    errs = [rel_err(out.cpu(), ref), rel_err(grad.cpu(), ref_grad)]
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if max(errs) > tol:
        row.check += " !"
        problems.append(f"{name}: rel err out/grad {row.check} (tol {tol})")
    del out, grad, fr, ref, ref_grad
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(f))
        row.base_fwd = timer(lambda: base(f))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(f), f, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(f), f, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "rotated_feature_align benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
            ListOption("points", POINTS, list(POINTS), list(POINTS)),
            # Both grad_output and features in the layout (the backward follows grad_output).
            ListOption("layouts", LAYOUTS, ["contiguous"], ["contiguous"]),
        ],
        bench=bench_rfa,
        labels=("op", "shape", "dtype", "boxes"),
        baseline="grid_sample",
        check="rel err out/grad",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
