"""Benchmark mmops.active_rotated_filter against a plain-PyTorch composite
(index_select of the weights through the inverse of the index table, then a
permute to mmcv's layout; the inverse table is computed once, outside the timing,
as a model would keep it), in the same process.

ReDet / S2A-Net ORConv shapes (8 orientations, 8 rotations, 3x3 kernels): out x in
planes 256x256, 128x128 and 64x64, and the first ORConv (1 orientation in: 256x32x1);
CPU: 32x32 and 16x16. Index tables from two distributions: "orn" (ORN's tables:
the grid rotated by multiples of 45 degrees, orientations shifted) and "random"
(a random permutation per rotation: scattered reads). Every configuration is first
checked against the float64 reference of the tests (output exact, gradient relative
error at most 1e-5 float32 or 2e-2 16-bit); then forward and forward+backward
(torch.autograd.grad with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from active_rotated_filter_reference import active_rotated_filter_ref, orn_indices

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TABLES = ("orn", "random")


@dataclass(frozen=True)
class Case:
    name: str
    out_planes: int
    in_planes: int
    orientations: int = 8
    kernel: int = 3
    rotations: int = 8


CUDA_CASES = [Case(f"{p}x{p}", p, p) for p in (256, 128, 64)] + [Case("first_256x32", 256, 32, orientations=1)]
CPU_CASES = [Case(f"{p}x{p}", p, p) for p in (32, 16)]


def table(case, kind, gen):
    o, k, r = case.orientations, case.kernel, case.rotations
    if kind == "orn":
        return orn_indices(o, k, r)
    e = o * k * k
    cols = [torch.randperm(e, generator=gen) + 1 for _ in range(r)]
    return torch.stack(cols, -1).reshape(o, k, k, r).to(torch.int32)


def inverse(indices):
    """[R * E] int64: source entry l of every (rotation, target) (indices a permutation per rotation)."""
    o, h, w, r = indices.shape
    return indices.reshape(o * h * w, r).long().sub(1).argsort(dim=0).t().reshape(-1)


def composite(x, inv, rotations):
    op, ip, o, h, w = x.shape
    e = o * h * w
    g = x.reshape(op, ip, e).index_select(2, inv)  # [op, ip, R * E]
    return g.view(op, ip, rotations, e).permute(0, 2, 1, 3).reshape(op * rotations, ip * o, h, w)


def bench_arf(case, dtype_name, kind, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    shape = (case.out_planes, case.in_planes, case.orientations, case.kernel, case.kernel)
    x = torch.randn(shape, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    idx = table(case, kind, gen)
    inv = inverse(idx).to(device)
    idx = idx.to(device)
    out_shape = (case.out_planes * case.rotations, case.in_planes * case.orientations, case.kernel, case.kernel)
    go = torch.randn(out_shape, generator=gen).to(device=device, dtype=dtype)
    row = FwdBwdRow(("active_rotated_filter", "x".join(map(str, shape)) + f" r{case.rotations}", dtype_name, kind))
    name = f"active_rotated_filter/{case.name}/{dtype_name}/{kind}"

    def mm(t):
        return torch.ops.mmops.active_rotated_filter(t, idx)

    def base(t):
        return composite(t, inv, case.rotations)

    try:
        out = mm(x)
        (grad,) = torch.autograd.grad(out, x, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    # the reference on the first 4 filters (output planes do not mix)
    xs = x.detach()[:4].double().cpu().requires_grad_(True)
    ref = active_rotated_filter_ref(xs, idx.cpu())
    rows = ref.shape[0]
    (ref_grad,) = torch.autograd.grad(ref, xs, go[:rows].double().cpu())
    errs = [
        rel_err(out[:rows].cpu(), ref),
        rel_err(composite(x.detach(), inv, case.rotations).cpu(), out.cpu()),
        rel_err(grad[:4].cpu(), ref_grad),
    ]
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if errs[0] != 0 or errs[1] != 0 or errs[2] > tol:
        row.check += " !"
        problems.append(f"{name}: rel err out/composite/grad {row.check} (tol {tol})")
    del out, grad, xs, ref, ref_grad
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x))
        row.base_fwd = timer(lambda: base(x))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x), x, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(x), x, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "active_rotated_filter benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("tables", TABLES, TABLES, TABLES),
        ],
        bench=bench_arf,
        labels=("op", "shape", "dtype", "table"),
        baseline="index_select",
        check="rel err out/composite/grad",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
