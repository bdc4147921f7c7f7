"""Benchmark mmops nms_rotated against a plain PyTorch composite (the IoU
matrix of bench_box_iou_rotated.py's composite, then the greedy loop in torch).
torchvision has no rotated NMS (0.29).

Inputs (bench_box_iou_rotated.make_rotated): "clustered" (detector-like
jittered copies of 100 objects, most boxes suppressed) and "uniform" (sparse
boxes on a 1000 x 1000 image, few suppressed); uniform scores; IoU threshold
0.5. Cases: 2000 and 20000 boxes (CPU: 500, 200), plain and with 5 labels.
Every case is first checked: mmops' kept indices must equal the composite's
run in float64 (up to pairs within 1e-6 of the threshold). On CUDA the time
includes the one host synchronisation for the kept count; the composite syncs
once per kept box. Above SLOW_COMPOSITE boxes the composite (seconds per call:
the IoU of N^2 pairs) is timed once, without warm-up, and only in fp32.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_box_iou_rotated import DTYPES, iou_matrix_composite, make_rotated
from bench_common import FwdBwdRow, ListOption, Timer, benchmark_main

import mmops  # noqa: F401  (registers torch.ops.mmops)

THRESHOLD = 0.5
LABELS = 5


@dataclass(frozen=True)
class Case:
    name: str
    distribution: str
    labels: bool


CASES = [Case(f"{d}{'_labels' if lab else ''}", d, lab) for d in ("clustered", "uniform") for lab in (False, True)]
SLOW_COMPOSITE = 5000
SIZES = ListOption("sizes", None, [2000, 20000], [200, 500], convert=int)


def nms_composite(boxes, scores, labels, threshold):
    """Greedy rotated NMS in torch: the [N, N] IoU matrix, then one step per kept box."""
    order = torch.sort(scores, descending=True, stable=True)[1]
    b = boxes[order]
    iou = iou_matrix_composite(b, b)
    if labels is not None:
        lab = labels[order]
        iou = torch.where(lab[:, None] == lab[None], iou, torch.zeros_like(iou))
    suppress = iou > threshold
    n = b.shape[0]
    removed = torch.zeros(n, dtype=torch.bool, device=b.device)
    keep = []
    i = 0
    while i < n:
        keep.append(i)
        removed |= suppress[i]
        removed[: i + 1] = True
        rest = torch.nonzero(~removed)
        if rest.numel() == 0:
            break
        i = int(rest[0, 0])  # one host synchronisation per kept box
    return order[torch.tensor(keep, dtype=torch.long, device=b.device)]


def bench(case: Case, size: int, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    dtype = DTYPES[dtype_name]
    boxes, scores = make_rotated(size, case.distribution, run.device, dtype, seed=size)
    g = torch.Generator().manual_seed(size)
    labels = torch.randint(0, LABELS, (size,), generator=g).to(run.device) if case.labels else None
    row = FwdBwdRow(("nms_rotated", case.name, str(size), dtype_name))
    mm = lambda: torch.ops.mmops.nms_rotated(boxes, scores, THRESHOLD, labels, True)  # noqa: E731
    try:
        keep = mm()
    except Exception as exc:  # report, and go on with the other rows
        row.check = "ERROR"
        problems.append(f"nms_rotated {case.name} {size} {dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    # float64 check of what mmops computes on these values (16-bit: its float32 compute)
    check_n = min(size, 5000)
    sub = (boxes[:check_n], scores[:check_n], None if labels is None else labels[:check_n])
    exp = nms_composite(sub[0].double(), sub[1].double(), sub[2], THRESHOLD)
    got = torch.ops.mmops.nms_rotated(sub[0], sub[1], THRESHOLD, sub[2], True)
    differ = len(set(got.tolist()) ^ set(exp.tolist()))
    row.check = f"kept {keep.numel()}, {differ} differ"
    if differ > max(1, check_n // 1000):
        row.check += " !"
        problems.append(f"nms_rotated {case.name} {size} {dtype_name}: {differ} kept boxes differ from float64")
    row.mm_fwd = timer(mm)
    base_timer = timer
    if size > SLOW_COMPOSITE:
        if dtype_name != "fp32":
            return row
        base_timer = Timer(run.device, iters=1, warmup=0)
    row.base_fwd = base_timer(lambda: nms_composite(boxes, scores, labels, THRESHOLD))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "nms_rotated benchmark",
        iters=(10, 2),
        warmup=(2, 1),
        cases=(CASES, CASES),
        options=[SIZES, ListOption("dtypes", DTYPES, ["fp32", "fp16", "bf16"], ["fp32"])],
        bench=bench,
        labels=("op", "case", "boxes", "dtype"),
        baseline="composite",
        check="vs float64",
        with_torchvision=False,
        backward=False,
        notes=f"; iou_threshold {THRESHOLD}, {LABELS} labels where marked",
    )


if __name__ == "__main__":
    sys.exit(main())
