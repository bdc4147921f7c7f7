"""Benchmark mmops.chamfer_distance against a plain-PyTorch composite (the full
squared-distance matrix by torch.cdist, then min over each axis; its backward
goes through cdist), in the same process.

Shapes: B=16, N=M=4096 (the issue's shape) and B=4, N=16384, M=4096; CPU:
B=2, N=M=256. Points from two distributions: "uniform" (in [-10, 10)^2) and
"clustered" (8 Gaussian blobs of sigma 0.3: many near-equal distances).
Every configuration is first checked against the float64 reference of the
tests on the first batch element (relative error of dist1 / dist2 against the
float64 minimum, and of the gradients against the float64 gradient of the
chosen pairs: at most 1e-5 float32 or 2e-2 16-bit); then forward and
forward+backward (torch.autograd.grad of dist1 and dist2) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from chamfer_distance_reference import chamfer_dist_of

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DISTRIBUTIONS = ("uniform", "clustered")


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    n: int
    m: int


CUDA_CASES = [Case("b16_4096", 16, 4096, 4096), Case("b4_16384x4096", 4, 16384, 4096)]
CPU_CASES = [Case("b2_256", 2, 256, 256)]


def points(batch, count, kind, gen):
    if kind == "uniform":
        return torch.rand(batch, count, 2, generator=gen) * 20 - 10
    blobs = torch.rand(batch, 8, 2, generator=gen) * 20 - 10
    which = torch.randint(0, 8, (batch, count), generator=gen)
    return blobs.gather(1, which[..., None].expand(-1, -1, 2)) + 0.3 * torch.randn(batch, count, 2, generator=gen)


def composite(xyz1, xyz2):
    d = torch.cdist(xyz1, xyz2) ** 2
    dist1, idx1 = d.min(2)
    dist2, idx2 = d.min(1)
    return dist1, dist2, idx1, idx2


def bench_chamfer(case, dtype_name, kind, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    xyz = [
        points(case.batch, c, kind, gen).to(device=device, dtype=dtype).requires_grad_(True) for c in (case.n, case.m)
    ]
    gos = [torch.randn(case.batch, c, generator=gen).to(device=device, dtype=dtype) for c in (case.n, case.m)]
    row = FwdBwdRow(("chamfer_distance", f"B{case.batch} N{case.n} M{case.m}", dtype_name, kind))
    name = f"chamfer_distance/{case.name}/{dtype_name}/{kind}"

    def mm(a, b):
        return torch.ops.mmops.chamfer_distance(a, b)

    try:
        d1, d2, i1, i2 = mm(*xyz)
        grads = torch.autograd.grad([d1, d2], xyz, gos)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    a, b = (t.detach()[:1].double().cpu() for t in xyz)
    full = ((a[:, :, None] - b[:, None]) ** 2).sum(-1)
    ref_in = [a.requires_grad_(True), b.requires_grad_(True)]
    r1, r2 = chamfer_dist_of(*ref_in, i1[:1].cpu(), i2[:1].cpu())
    ref_grads = torch.autograd.grad([r1, r2], ref_in, [g[:1].double().cpu() for g in gos])
    errs = [rel_err(d1[:1].cpu(), full.amin(2)), rel_err(d2[:1].cpu(), full.amin(1))]
    errs += [rel_err(g[:1].cpu(), r) for g, r in zip(grads, ref_grads)]
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if max(errs) > tol:
        row.check += " !"
        problems.append(f"{name}: rel err dist1/dist2/grad1/grad2 {row.check} (tol {tol})")
    del d1, d2, i1, i2, grads, full, ref_in, r1, r2, ref_grads

    def fb(fn):
        d = fn(*xyz)
        return torch.autograd.grad([d[0], d[1]], xyz, gos)

    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(*xyz))
        row.base_fwd = timer(lambda: composite(*xyz))
    row.mm_fb = timer(lambda: fb(mm))
    row.base_fb = timer(lambda: fb(composite))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "chamfer_distance benchmark",
        iters=(20, 3),
        warmup=(3, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
        ],
        bench=bench_chamfer,
        labels=("op", "shape", "dtype", "points"),
        baseline="cdist+min",
        check="rel err dist/grads",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
