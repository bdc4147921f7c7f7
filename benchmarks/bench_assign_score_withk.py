"""Benchmark mmops.assign_score_withk against a plain-PyTorch composite (gather
of the neighbour and center features, then two einsums:
sum_m s * p[knn] - sum_m s * c[center]), in the same process.

PAConv shapes: B=8, npoint=1024, K=16, M=8, O=64 on N=1024 points (the issue's
shape) and a larger first-layer shape (N=npoint=4096, K=32, M=8, O=32); CPU:
B=2, npoint=128, K=8, M=4, O=16, N=128. Neighbour indices from two
distributions: "knn" (the real K nearest neighbours of uniform random 3-D
points, the center first, as PAConv's kNN gives) and "random" (uniform random
neighbours: scattered reads). Every configuration is first checked against the
float64 reference of the tests on the first batch element (relative error of
the output and the three gradients, at most 1e-5 float32 or 2e-2 16-bit); then
forward and forward+backward (torch.autograd.grad with a fixed output
gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from assign_score_withk_reference import assign_score_withk_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DISTRIBUTIONS = ("knn", "random")


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    npoint: int
    k: int
    m: int
    o: int
    n: int


CUDA_CASES = [Case("paconv_1024", 8, 1024, 16, 8, 64, 1024), Case("paconv_4096", 8, 4096, 32, 8, 32, 4096)]
CPU_CASES = [Case("small", 2, 128, 8, 4, 16, 128)]


def neighbours(case, kind, gen):
    """[B, npoint, K] int64, knn[b, n, 0] = n (the center is point n)."""
    B, npoint, K, N = case.batch, case.npoint, case.k, case.n
    if kind == "random":
        knn = torch.randint(0, N, (B, npoint, K), generator=gen)
    else:
        xyz = torch.rand(B, N, 3, generator=gen)
        knn = torch.cdist(xyz[:, :npoint], xyz).topk(K, dim=2, largest=False).indices
    knn[:, :, 0] = torch.arange(npoint)
    return knn


def composite(scores, points, centers, knn):
    b = torch.arange(knn.shape[0], device=knn.device)[:, None, None]
    gathered = points[b, knn]  # [B, npoint, K, M, O]
    center = centers[b[..., 0], knn[:, :, 0]]  # [B, npoint, M, O]
    return torch.einsum("bnkm,bnkmo->bonk", scores, gathered) - torch.einsum("bnkm,bnmo->bonk", scores, center)


def bench_assign(case, dtype_name, kind, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    B, npoint, K, M, O, N = case.batch, case.npoint, case.k, case.m, case.o, case.n
    scores = torch.rand(B, npoint, K, M, generator=gen).softmax(-1)
    points, centers = torch.randn(B, N, M, O, generator=gen), torch.randn(B, N, M, O, generator=gen)
    knn = neighbours(case, kind, gen).to(device)
    inputs = [t.to(device=device, dtype=dtype).requires_grad_(True) for t in (scores, points, centers)]
    go = torch.randn(B, O, npoint, K, generator=gen).to(device=device, dtype=dtype)
    shape = f"B{B} np{npoint} K{K} M{M} O{O} N{N}"
    row = FwdBwdRow(("assign_score_withk", shape, dtype_name, kind))
    name = f"assign_score_withk/{case.name}/{dtype_name}/{kind}"

    def mm(*t):
        return torch.ops.mmops.assign_score_withk(*t, knn)

    def base(*t):
        return composite(*t, knn)

    try:
        out = mm(*inputs)
        grads = torch.autograd.grad(out, inputs, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    ref_in = [t.detach()[:1].double().cpu().requires_grad_(True) for t in inputs]
    ref = assign_score_withk_ref(*ref_in, knn[:1].cpu())
    ref_grads = torch.autograd.grad(ref, ref_in, go[:1].double().cpu())
    errs = [rel_err(out[:1].cpu(), ref)] + [rel_err(g[:1].cpu(), r) for g, r in zip(grads, ref_grads)]
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if max(errs) > tol:
        row.check += " !"
        problems.append(f"{name}: rel err out/scores/points/centers {row.check} (tol {tol})")
    del out, grads, ref, ref_grads, ref_in
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(*inputs))
        row.base_fwd = timer(lambda: base(*inputs))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(*inputs), inputs, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(*inputs), inputs, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "assign_score_withk benchmark",
        iters=(50, 3),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
        ],
        bench=bench_assign,
        labels=("op", "shape", "dtype", "knn"),
        baseline="gather+einsum",
        check="rel err out/grads",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
