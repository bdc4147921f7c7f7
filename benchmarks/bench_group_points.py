"""Benchmark mmops.group_points (grouping_operation) and gather_points against
torch.gather composites (the index widened to int64 and expanded over the channels;
its backward is torch's scatter_add), in the same process.

Shapes: a PointNet++ SA layer on KITTI (the issue's target): 16 clouds of 16384
points with 64 channels, 4096 centres x 32 samples (group) and the 4096 centres'
features (gather); a second layer: 16 x 4096 points, 128 channels, 1024 x 64.
CPU: 2 x 1024 points, 16 channels, 256 x 16. Index distributions: "ball" (each
centre's samples near one point, padded with repeats of the first, as ball_query
returns them: many repeated indices) and "uniform" (random indices: scattered
reads). Every configuration is first checked against the composite (outputs and
gradients equal: copies and sums of the same values, up to the order of additions);
then forward and forward+backward (torch.autograd.grad with a fixed output gradient)
are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DISTRIBUTIONS = ("ball", "uniform")


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    points: int
    channels: int
    centres: int
    samples: int


CUDA_CASES = [
    Case("sa1_16x16384_c64_4096x32", 16, 16384, 64, 4096, 32),
    Case("sa2_16x4096_c128_1024x64", 16, 4096, 128, 1024, 64),
]
CPU_CASES = [Case("cpu_2x1024_c16_256x16", 2, 1024, 16, 256, 16)]


def indices(case, kind, gen):
    b, n, p, s = case.batch, case.points, case.centres, case.samples
    if kind == "uniform":
        return torch.randint(0, n, (b, p, s), generator=gen, dtype=torch.int32)
    centre = torch.randint(0, n, (b, p, 1), generator=gen)
    near = (centre + torch.randint(-64, 65, (b, p, s), generator=gen)).clamp(0, n - 1)
    found = torch.randint(1, s + 1, (b, p, 1), generator=gen)  # how many the ball held
    near = torch.where(torch.arange(s) < found, near, near[..., :1])
    return near.to(torch.int32)


def torch_group(features, idx):
    b, c = features.shape[:2]
    flat = idx.long().reshape(b, 1, -1).expand(b, c, -1)
    return features.gather(2, flat).view(b, c, *idx.shape[1:])


def bench_group(case, dtype_name, kind, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(case.batch, case.channels, case.points, generator=gen).to(device=device, dtype=dtype)
    x.requires_grad_(True)
    idx = indices(case, kind, gen).to(device)
    rows = []
    for name, op, index in (
        ("group_points", torch.ops.mmops.group_points, idx),
        ("gather_points", torch.ops.mmops.gather_points, idx[:, :, 0].contiguous()),
    ):
        row = FwdBwdRow((name, case.name, dtype_name, kind))
        go = torch.randn(case.batch, case.channels, *index.shape[1:], generator=gen).to(device=device, dtype=dtype)

        def mm(t, op=op, index=index):
            return op(t, index)

        def base(t, index=index):
            return torch_group(t, index)

        try:
            out = mm(x)
            (grad,) = torch.autograd.grad(out, x, go)
        except Exception as exc:
            row.check = "ERROR"
            problems.append(f"{name}/{case.name}/{dtype_name}/{kind}: mmops raised {type(exc).__name__}: {exc}")
            rows.append(row)
            continue
        ref = base(x)
        # the gradient against float64: torch.gather's backward adds in the input dtype
        x64 = x.detach().double().requires_grad_(True)
        (ref_grad,) = torch.autograd.grad(base(x64), x64, go.double())
        errs = [rel_err(out.float(), ref.float()), rel_err(grad.float(), ref_grad.float())]
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        row.check = "/".join(f"{e:.0e}" for e in errs)
        if errs[0] != 0 or errs[1] > tol:
            row.check += " !"
            problems.append(f"{name}/{case.name}/{dtype_name}/{kind}: rel err fwd/bwd {row.check} (tol {tol})")
        del out, grad, ref, ref_grad, x64
        with torch.no_grad():
            row.mm_fwd = timer(lambda: mm(x))
            row.base_fwd = timer(lambda: base(x))
        row.mm_fb = timer(lambda: torch.autograd.grad(mm(x), x, go))
        row.base_fb = timer(lambda: torch.autograd.grad(base(x), x, go))
        rows.append(row)
    return rows


def main() -> int:
    return benchmark_main(
        __doc__,
        "group_points benchmark",
        iters=(50, 3),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
        ],
        bench=bench_group,
        labels=("op", "shape", "dtype", "distribution"),
        baseline="torch.gather",
        check="rel err fwd/bwd",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
