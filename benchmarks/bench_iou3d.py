"""Benchmark mmops' BEV ops of mmcv's iou3d (boxes_iou_bev, boxes_overlap_bev,
nms_bev, nms_normal_bev) against plain PyTorch composites: the vectorised
Sutherland-Hodgman clip of bench_box_iou_rotated.py (in row chunks) for the
overlaps, and bench_nms_rotated.py's greedy loop on that IoU matrix (one host
sync per kept box) for the NMS ops (nms_normal_bev: the same boxes with the
angle set to 0, which is its axis-aligned IoU). torchvision has no rotated
ops (0.29).

Inputs (bench_box_iou_rotated.make_rotated, turned into the ops' formats):
"clustered" (detector-like: jittered copies of 100 objects, most boxes of an
object overlap and are suppressed) and "uniform" (sparse boxes on a 1000 x 1000
area: few overlap). Sizes: 4000 boxes, all pairs 4000 x 4000 for the overlaps
(CPU: 200). NMS threshold 0.5, no pre/post_max_size. Every case is first
checked against the composite in float64 (overlaps: max abs error on a corner
of the output, areas relative; NMS: the kept sets). Forward only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_box_iou_rotated import DTYPES, TOLERANCE, iou_matrix_composite, make_rotated
from bench_common import FwdBwdRow, ListOption, benchmark_main
from bench_nms_rotated import nms_composite

import mmops  # noqa: F401  (registers torch.ops.mmops)

THRESHOLD = 0.5


@dataclass(frozen=True)
class Case:
    name: str
    op: str
    distribution: str


OPS = ("boxes_iou_bev", "boxes_overlap_bev", "nms_bev", "nms_normal_bev")
CASES = [Case(f"{op}_{d}", op, d) for op in OPS for d in ("clustered", "uniform")]
SIZES = ListOption("sizes", None, [4000], [200], convert=int)


def inputs(op: str, n: int, distribution: str, device, dtype, seed: int):
    """(the op's boxes, the same as (cx, cy, w, h, angle) in float64 for the composite,
    scores); nms_normal_bev's composite boxes have angle 0 (its axis-aligned IoU)."""
    rotated, scores = make_rotated(n, distribution, device, dtype, seed=seed)
    if op == "boxes_overlap_bev":  # (x, y, z, dx, dy, dz, heading)
        z = torch.zeros_like(rotated[:, :1])
        return torch.cat([rotated[:, :2], z, rotated[:, 2:4], z + 1, rotated[:, 4:]], 1), rotated.double(), scores
    half = rotated[:, 2:4] / 2  # (x1, y1, x2, y2, ry)
    boxes = torch.cat([rotated[:, :2] - half, rotated[:, :2] + half, rotated[:, 4:]], 1)
    # the composite sees what the op computes on: the rounded boxes, converted in float64
    # (rounding the centres back to 16 bits would move 16-bit boxes by up to a rounding
    # step of their coordinates, ~8 at 1000 in bfloat16; the ops convert in float)
    x1, y1, x2, y2, ry = boxes.double().unbind(1)
    rotated = torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, ry * (op != "nms_normal_bev")], 1)
    return boxes, rotated, scores


def overlap_composite(op: str, a, b):
    iou = iou_matrix_composite(a, b)
    if op == "boxes_iou_bev":
        return iou
    # intersection = iou (area_a + area_b) / (1 + iou)
    areas = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None]
    return iou * areas / (1 + iou)


def mmops_call(op: str, boxes, scores):
    if op == "nms_bev":
        return lambda: torch.ops.mmops.nms_bev(boxes, scores, THRESHOLD, None, None)
    if op == "nms_normal_bev":
        return lambda: torch.ops.mmops.nms_normal_bev(boxes, scores, THRESHOLD)
    return lambda: getattr(torch.ops.mmops, op)(boxes, boxes)


def check(case: Case, boxes, rotated, scores, out, problems) -> str:
    """mmops against the float64 composite (on the first boxes); the row's check text."""
    if case.op.startswith("nms"):
        k = min(boxes.shape[0], 3000)
        exp = nms_composite(rotated[:k].double(), scores[:k].double(), None, THRESHOLD)
        got = mmops_call(case.op, boxes[:k], scores[:k])()
        differ = len(set(got.tolist()) ^ set(exp.tolist()))
        if differ > max(1, k // 1000):
            problems.append(f"{case.name}: {differ} kept boxes differ from float64")
            return f"kept {out.numel()}, {differ} differ !"
        return f"kept {out.numel()}, {differ} differ"
    k = min(boxes.shape[0], 400)
    ref = overlap_composite(case.op, rotated[:k].double(), rotated[:k].double())
    err = (out[:k, :k].double() - ref).abs().max().item()
    if case.op == "boxes_overlap_bev":
        err /= max(ref.abs().max().item(), 1.0)  # areas reach ~3000: relative
    tol = TOLERANCE.get(boxes.dtype, 2e-2)
    if err > tol:
        problems.append(f"{case.name}: max error {err:.2e} > {tol}")
        return f"max err {err:.1e} !"
    return f"max err {err:.1e}"


def bench(case: Case, size: int, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    dtype = DTYPES[dtype_name]
    boxes, rotated64, scores = inputs(case.op, size, case.distribution, run.device, dtype, seed=size)
    rotated = rotated64.to(dtype)  # the composite's timed input
    shape = f"{size}x{size}" if case.op.startswith("boxes") else str(size)
    row = FwdBwdRow((case.op, case.distribution, shape, dtype_name))
    mm = mmops_call(case.op, boxes, scores)
    try:
        out = mm()
    except Exception as exc:  # report, and go on with the other rows
        row.check = "ERROR"
        problems.append(f"{case.name} {size} {dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    row.check = check(case, boxes, rotated64, scores, out, problems)
    del out
    row.mm_fwd = timer(mm)
    if case.op.startswith("nms"):
        row.base_fwd = timer(lambda: nms_composite(rotated, scores, None, THRESHOLD))
    else:
        row.base_fwd = timer(lambda: overlap_composite(case.op, rotated, rotated))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "iou3d benchmark",
        iters=(5, 2),  # a composite call takes 0.1-1 s (one host sync per kept box)
        warmup=(1, 1),
        cases=(CASES, CASES),
        options=[SIZES, ListOption("dtypes", DTYPES, ["fp32", "fp16", "bf16"], ["fp32"])],
        bench=bench,
        labels=("op", "case", "boxes", "dtype"),
        baseline="composite",
        check="vs float64",
        with_torchvision=False,
        backward=False,
        notes=f"; nms thresh {THRESHOLD}",
    )


if __name__ == "__main__":
    sys.exit(main())
