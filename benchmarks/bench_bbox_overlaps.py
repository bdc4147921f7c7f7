"""Benchmark mmops bbox_overlaps against a plain PyTorch composite (nms /
batched_nms: bench_nms.py).

Inputs: random boxes with sides up to 100 px on an 800 x 800 image (as
bench_nms.py), mode "iou", offset 0, in three cases: anchors vs ground truth
(CUDA 100000 x 50), proposals vs proposals (5000 x 5000) and aligned pairs
(1000000); smaller on CPU. Every case is first checked against the composite in
float64. Then the forward, and forward + backward w.r.t. both box sets, are
timed in the same run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main
from bench_nms import DTYPES, make_boxes  # the boxes of bench_nms.py

import mmops  # noqa: F401  (registers torch.ops.mmops)


@dataclass(frozen=True)
class Case:
    name: str
    m: int
    n: int
    aligned: bool


CUDA_CASES = [
    Case("anchors", 100000, 50, False),
    Case("proposals", 5000, 5000, False),
    Case("aligned", 1000000, 1000000, True),
]
CPU_CASES = [
    Case("anchors", 20000, 50, False),
    Case("proposals", 1000, 1000, False),
    Case("aligned", 100000, 100000, True),
]
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}  # max abs error; 16-bit: 1e-2


def overlaps_composite(b1, b2, aligned: bool):
    """mmcv bbox_overlaps (iou, offset 0) in plain PyTorch ops (broadcasting)."""
    if not aligned:
        b1, b2 = b1[:, None, :], b2[None, :, :]
    area1 = (b1[..., 2] - b1[..., 0]) * (b1[..., 3] - b1[..., 1])
    area2 = (b2[..., 2] - b2[..., 0]) * (b2[..., 3] - b2[..., 1])
    w = (torch.minimum(b1[..., 2], b2[..., 2]) - torch.maximum(b1[..., 0], b2[..., 0])).clamp(min=0)
    h = (torch.minimum(b1[..., 3], b2[..., 3]) - torch.maximum(b1[..., 1], b2[..., 1])).clamp(min=0)
    inter = w * h
    return inter / (area1 + area2 - inter).clamp(min=1e-6)


def bench(case: Case, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    dtype, aligned = DTYPES[dtype_name], case.aligned
    b1, _, _ = make_boxes(case.m, run.device, dtype, seed=1)
    b2, _, _ = make_boxes(case.n, run.device, dtype, seed=2)
    shape = f"{case.m} aligned" if aligned else f"{case.m}x{case.n}"
    row = FwdBwdRow(("bbox_overlaps", shape, dtype_name))

    def mm(a, b):
        return torch.ops.mmops.bbox_overlaps(a, b, "iou", aligned, 0)

    def base(a, b):
        return overlaps_composite(a, b, aligned)

    x1, x2 = b1.clone().requires_grad_(True), b2.clone().requires_grad_(True)

    def fwd_bwd(fn):
        out = fn(x1, x2)
        torch.autograd.grad(out, (x1, x2), torch.ones_like(out))

    try:
        out = mm(b1, b2)
    except Exception as exc:  # report, and go on with the other rows
        row.check = "ERROR"
        problems.append(f"bbox_overlaps {case.name} {dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    err = (out.double() - base(b1.double(), b2.double())).abs().max().item() if out.numel() else 0.0
    tol = TOLERANCE.get(dtype, 1e-2)
    row.check = f"max err {err:.1e}"
    if err > tol:
        row.check += " !"
        problems.append(f"bbox_overlaps {shape} {dtype_name}: max error {err:.2e} > {tol}")
    del out
    row.mm_fwd = timer(lambda: mm(b1, b2))
    row.base_fwd = timer(lambda: base(b1, b2))
    row.mm_fb = timer(lambda: fwd_bwd(mm))
    row.base_fb = timer(lambda: fwd_bwd(base))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "bbox_overlaps benchmark",
        iters=(50, 5),
        warmup=(10, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[ListOption("dtypes", DTYPES, ["fp32"], ["fp32"])],
        bench=bench,
        labels=("op", "shape", "dtype"),
        baseline="composite",
        check="vs float64",
        with_torchvision=False,
        notes="; mode iou, offset 0; fwd+bwd: gradients of both box sets",
    )


if __name__ == "__main__":
    sys.exit(main())
