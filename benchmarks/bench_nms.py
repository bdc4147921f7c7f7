"""Benchmark mmops nms / batched_nms against torchvision and mmcv's own CUDA kernels
(bbox_overlaps: bench_bbox_overlaps.py).

Box distributions (--dists), IoU threshold 0.5, uniform-ish scores:
  sparse    N boxes with sides up to 100 px anywhere on an 800 x 800 image: few overlap
  clusters  detector-like: ~100 objects of 20-300 px on a 1333 x 800 image, every box a
            jittered copy of one (centre +-10% of its size, size x exp(N(0, 0.1))), scored by
            object quality and noise; batched_nms categories per object
  large     sides of 200-600 px on an 800 x 800 image: most pairs overlap
batched_nms: 80 categories (per object for "clusters"). Every case is first checked: mmops'
kept indices must equal torchvision's (batched_nms: up to the order of equal scores); the
mmcv column is checked the same way. Then all are timed in the same run (forward only). On
CUDA the time includes the one host synchronisation every library needs for the kept count.

The mmcv column: mmcv's nms kernel and its Python batched_nms over it, from mmcv_anchor
(bench_common.mmcv_anchor: $MMOPS_MMCV_ANCHOR names its folder); skipped on the CPU and
when it is not built.

Cases: nms, batched_nms; --sizes: box counts; --dists: distributions.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, fmt_ms, fmt_ratio, mmcv_anchor, torchvision_op

import mmops  # noqa: F401  (registers torch.ops.mmops)

tv_nms, tv_batched_nms = torchvision_op("nms"), torchvision_op("batched_nms")
anchor, ANCHOR_NOTE = mmcv_anchor() if torch.cuda.is_available() else (None, "mmcv column: CUDA only")

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
SIZES = ListOption("sizes", None, [1000, 20000, 100000], [1000, 5000], convert=int)
DISTS = ListOption("dists", ("sparse", "clusters", "large"), ["sparse", "clusters", "large"], ["sparse", "clusters"])


def mmcv_call(case: Case, boxes, scores, idxs):
    """The anchor's kept indices (mmcv returns (dets, keep))."""
    if case.name == "nms":
        return anchor.nms(boxes, scores, THRESHOLD)[1]
    return anchor.batched_nms(boxes, scores, idxs, dict(iou_threshold=THRESHOLD))[1]


def make_boxes(n: int, device, dtype, seed: int = 0, dist: str = "sparse"):
    """(boxes [n, 4] x1 y1 x2 y2, scores [n], category ids [n]) of one distribution."""
    g = torch.Generator().manual_seed(seed)
    if dist == "clusters":
        objects = 100
        size = torch.exp(torch.empty(objects, 2).uniform_(3.0, 5.7, generator=g))  # 20-300 px
        centre = torch.rand(objects, 2, generator=g) * (torch.tensor([1333.0, 800.0]) - size) + size / 2
        quality = torch.rand(objects, generator=g)
        obj = torch.randint(0, objects, (n,), generator=g)
        wh = size[obj] * torch.exp(0.1 * torch.randn(n, 2, generator=g))
        xy = centre[obj] + 0.1 * size[obj] * torch.randn(n, 2, generator=g)
        boxes = torch.cat([xy - wh / 2, xy + wh / 2], 1)
        scores = 0.5 * quality[obj] + 0.5 * torch.rand(n, generator=g)
        idxs = torch.randint(0, CATEGORIES, (objects,), generator=g)[obj]
    else:
        side, extent = (100.0, 0.0) if dist == "sparse" else (400.0, 200.0)
        xy = torch.rand(n, 2, generator=g) * 800
        wh = extent + torch.rand(n, 2, generator=g) * side
        boxes = torch.cat([xy, xy + wh], 1)
        scores = torch.rand(n, generator=g)
        idxs = torch.randint(0, CATEGORIES, (n,), generator=g)
    return boxes.to(device=device, dtype=dtype), scores.to(device=device, dtype=dtype), idxs.to(device)


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


def bench(case: Case, n: int, dist: str, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    boxes, scores, idxs = make_boxes(n, run.device, DTYPES[dtype_name], seed=n, dist=dist)
    row = FwdBwdRow((case.name, dist, str(n), dtype_name))
    try:
        keep = case.mmops(boxes, scores, idxs)
    except Exception as exc:  # report, and go on with the other rows
        row.check = "ERROR"
        problems.append(f"{case.name} {dist} n={n} {dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    checks = [f"kept {keep.numel()}"]
    if tv_nms is not None:
        checks.append("tv " + compare_keep(keep, case.baseline(boxes, scores, idxs), scores))
        row.base_fwd = timer(lambda: case.baseline(boxes, scores, idxs))
    if anchor is not None and run.cuda:
        try:
            checks.append("mmcv " + compare_keep(keep, mmcv_call(case, boxes, scores, idxs), scores))
            row.extra["mmcv"] = timer(lambda: mmcv_call(case, boxes, scores, idxs))
        except Exception as exc:  # mmcv's kernel takes fewer dtypes
            checks.append(f"mmcv: {type(exc).__name__}")
    row.check = ", ".join(checks)
    if "DIFFERS" in row.check:
        problems.append(f"{case.name} {dist} n={n} {dtype_name}: kept indices differ ({row.check})")
    row.mm_fwd = timer(lambda: case.mmops(boxes, scores, idxs))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "nms benchmark",
        iters=(50, 5),
        warmup=(10, 1),
        cases=(CASES, CASES),
        options=[SIZES, DISTS, ListOption("dtypes", DTYPES, ["fp32"], ["fp32"])],
        bench=bench,
        labels=("op", "boxes", "size", "dtype"),
        baseline="torchvision",
        check="kept indices",
        after=[
            ("mmcv ms", lambda r: fmt_ms(r.extra.get("mmcv"))),
            ("vs mmcv", lambda r: fmt_ratio(r.extra.get("mmcv"), r.mm_fwd)),
        ],
        backward=False,
        notes=f"; IoU threshold {THRESHOLD}, batched_nms with {CATEGORIES} categories; {ANCHOR_NOTE}",
        extra_baselines=[("mmcv", "mmcv", None)],
    )


if __name__ == "__main__":
    sys.exit(main())
