"""Benchmark mmops' diff_iou_rotated_2d / _3d against a plain-PyTorch composite, in the same process.

The composite (test/python/diff_iou_rotated_reference.py) is the candidate-vertex
method mmcv uses, in torch ops: the corners of each box inside the other plus
the 16 edge-edge crossings, sorted by angle around their mean (argsort where
mmcv has a CUDA sort kernel), the shoelace formula; gradients by autograd.
torchvision has no rotated IoU.

Pairs: B x N aligned pairs (a rotated-IoU loss over the matched boxes of a
detector). Distributions: "overlap" (box2 = box1 moved by <= 10% of its size,
sizes and angles jittered: training near convergence) and "random" (centres
up to 3 box sizes apart, any angle: many misses and partial overlaps).
Each configuration is first checked against the composite in float64 on the
same (rounded) inputs: IoU and gradient max error relative to the largest
value, 1e-4 for fp32, 2e-2 for fp16 / bf16. Then forward and forward+backward
(torch.autograd.grad of the summed IoU) are timed.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err
from diff_iou_rotated_reference import composite_iou_2d, composite_iou_3d

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DISTRIBUTIONS = ("overlap", "random")


@dataclass(frozen=True)
class Case:
    name: str  # the op
    batch: int
    pairs: int

    @property
    def three_d(self) -> bool:
        return self.name.endswith("3d")


CUDA_CASES = [
    Case(op, b, n)
    for op in ("diff_iou_rotated_2d", "diff_iou_rotated_3d")
    for b, n in ((1, 10000), (16, 10000), (16, 100000))
]
CPU_CASES = [Case(op, b, n) for op in ("diff_iou_rotated_2d", "diff_iou_rotated_3d") for b, n in ((1, 2000), (4, 2000))]


def make_pairs(case: Case, distribution: str, seed: int = 0):
    """[B, N, 5 or 7] float64 pairs of the distribution."""
    g = torch.Generator().manual_seed(seed)
    shape = (case.batch, case.pairs)
    dims = 3 if case.three_d else 2

    def rand(*extra):
        return torch.rand(*shape, *extra, generator=g, dtype=torch.float64)

    size = 1 + 9 * rand(dims)
    centre = 100 * rand(dims)
    angle = (2 * rand(1) - 1) * math.pi
    if distribution == "overlap":
        size2 = size * (0.9 + 0.2 * rand(dims))
        centre2 = centre + 0.1 * size * (2 * rand(dims) - 1)
        angle2 = angle + 0.2 * (2 * rand(1) - 1)
    else:
        size2 = 1 + 9 * rand(dims)
        centre2 = centre + 3 * size * (2 * rand(dims) - 1)
        angle2 = (2 * rand(1) - 1) * math.pi
    return torch.cat([centre, size, angle], -1), torch.cat([centre2, size2, angle2], -1)


def bench(case, distribution, dtype_name, run, timer, problems):
    dtype, device = DTYPES[dtype_name], run.device
    b1, b2 = (t.to(device=device, dtype=dtype) for t in make_pairs(case, distribution))
    op = torch.ops.mmops.diff_iou_rotated_3d if case.three_d else torch.ops.mmops.diff_iou_rotated_2d
    composite = composite_iou_3d if case.three_d else composite_iou_2d
    row = FwdBwdRow((case.name, f"{case.batch}x{case.pairs} {distribution}", dtype_name, "-"))
    r1, r2 = b1.detach().clone().requires_grad_(True), b2.detach().clone().requires_grad_(True)
    try:
        out = op(r1, r2)
        grads = torch.autograd.grad(out.sum(), (r1, r2))
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{case.name}/{distribution}/{dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    d1, d2 = b1.double().requires_grad_(True), b2.double().requires_grad_(True)
    ref = composite(d1, d2)
    ref_grads = torch.autograd.grad(ref.sum(), (d1, d2))
    fwd_err = rel_err(out, ref)
    bwd_err = max(rel_err(g, r) for g, r in zip(grads, ref_grads))
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    row.check = f"{fwd_err:.0e}/{bwd_err:.0e}"
    if fwd_err > tol or bwd_err > tol:
        row.check += " !"
        problems.append(
            f"{case.name}/{distribution}/{dtype_name}: vs the float64 composite: IoU rel err {fwd_err:.2e}, "
            f"grad rel err {bwd_err:.2e} (tol {tol:.0e})"
        )
    with torch.no_grad():
        row.mm_fwd = timer(lambda: op(b1, b2))
        row.base_fwd = timer(lambda: composite(b1, b2))
    row.mm_fb = timer(lambda: torch.autograd.grad(op(r1, r2).sum(), (r1, r2)))
    row.base_fb = timer(lambda: torch.autograd.grad(composite(r1, r2).sum(), (r1, r2)))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "diff_iou_rotated benchmark",
        iters=(50, 3),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
            ListOption("dtypes", DTYPES, ["fp32", "fp16", "bf16"], ["fp32"]),
        ],
        bench=bench,
        baseline="composite",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
