"""Benchmark mmops nms / batched_nms against torchvision (bbox_overlaps:
bench_bbox_overlaps.py).

Inputs: N random boxes with sides up to 100 px on an 800 x 800 image, uniform
scores, IoU threshold 0.5; batched_nms with 80 categories. Every case is first
checked: mmops' kept indices must equal torchvision's (for batched_nms, up to
the order of equal scores). Then both are timed in the same run (nms has no
backward: forward only). On CUDA the time includes the one host
synchronisation both libraries need for the kept count; the CPU has smaller N.

Cases: nms, batched_nms; --sizes: the box counts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, torchvision_op

import mmops  # noqa: F401  (registers torch.ops.mmops)

tv_nms, tv_batched_nms = torchvision_op("nms"), torchvision_op("batched_nms")

CATEGORIES = 80
THRESHOLD = 0.5
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


@dataclass(frozen=True)
class Case:
    name: str
    mmops: Callable  # (boxes, scores, idxs) -> keep
    baseline: Callable  # torchvision's, called only when torchvision is installed


CASES = [
    Case("nms", lambda b, s, i: torch.ops.mmops.nms(b, s, THRESHOLD), lambda b, s, i: tv_nms(b, s, THRESHOLD)),
    Case(
        "batched_nms",
        lambda b, s, i: torch.ops.mmops.batched_nms(b, s, i, THRESHOLD),
        lambda b, s, i: tv_batched_nms(b, s, i, THRESHOLD),
    ),
]
SIZES = ListOption("sizes", None, [1000, 5000, 20000, 100000], [1000, 5000, 20000], convert=int)


def make_boxes(n: int, device, dtype, seed: int = 0):
    """Boxes on an 800 x 800 image with sides up to 100, uniform scores, 80 categories."""
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 800
    wh = torch.rand(n, 2, generator=g) * 100
    boxes = torch.cat([xy, xy + wh], 1).to(device=device, dtype=dtype)
    scores = torch.rand(n, generator=g).to(device=device, dtype=dtype)
    idxs = torch.randint(0, CATEGORIES, (n,), generator=g).to(device)
    return boxes, scores, idxs


def compare_keep(keep, tv_keep, scores) -> str:
    """ "equal", or "equal up to ties" when only boxes of equal score swap places
    (torchvision's batched_nms merges categories with an unstable sort; mmops
    puts the lower index first)."""
    if torch.equal(keep, tv_keep):
        return "equal"
    if (
        keep.numel() == tv_keep.numel()
        and torch.equal(keep.sort()[0], tv_keep.sort()[0])
        and torch.equal(scores[keep], scores[tv_keep])
    ):
        return "equal up to ties"
    return "DIFFERS"


def bench(case: Case, n: int, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    boxes, scores, idxs = make_boxes(n, run.device, DTYPES[dtype_name], seed=n)
    row = FwdBwdRow((case.name, str(n), dtype_name))
    try:
        keep = case.mmops(boxes, scores, idxs)
    except Exception as exc:  # report, and go on with the other rows
        row.check = "ERROR"
        problems.append(f"{case.name} n={n} {dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    row.check = "n/a"
    if tv_nms is not None:
        row.check = compare_keep(keep, case.baseline(boxes, scores, idxs), scores)
        if row.check == "DIFFERS":
            problems.append(f"{case.name} n={n} {dtype_name}: kept indices differ from torchvision")
        row.base_fwd = timer(lambda: case.baseline(boxes, scores, idxs))
    row.mm_fwd = timer(lambda: case.mmops(boxes, scores, idxs))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "nms benchmark",
        iters=(50, 5),
        warmup=(10, 1),
        cases=(CASES, CASES),
        options=[SIZES, ListOption("dtypes", DTYPES, ["fp32"], ["fp32"])],
        bench=bench,
        labels=("op", "size", "dtype"),
        baseline="torchvision",
        check="kept indices",
        backward=False,
        notes=f"; IoU threshold {THRESHOLD}, batched_nms with {CATEGORIES} categories",
    )


if __name__ == "__main__":
    sys.exit(main())
