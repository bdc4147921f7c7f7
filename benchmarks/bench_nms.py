"""Benchmark mmops nms / batched_nms against torchvision, and bbox_overlaps
against a plain PyTorch composite.

Inputs: N random boxes with sides up to 100 px on an 800 x 800 image, uniform
scores, IoU threshold 0.5; batched_nms with 80 categories. Every case is first
checked: mmops' kept indices must equal torchvision's (and, for batched_nms,
each other's per-category result), bbox_overlaps must match the composite.
Then both are timed in the same run:

  CUDA: CUDA events around each call after warm-up, median (nms includes the
        one host synchronisation both libraries need for the kept count).
  CPU:  time.perf_counter, median, torch.get_num_threads() threads, smaller N.

ratio = baseline ms / mmops ms (> 1: mmops is faster).

Usage:
  PYTHONPATH=python python benchmarks/bench_nms.py [--device cpu|cuda] [--iters N]
      [--warmup N] [--cases nms,batched_nms,bbox_overlaps] [--sizes 1000,5000] [--dtypes fp32,fp16]

Exit code 1 when a correctness check fails (timings are never asserted).
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

import torch

import mmops
from bench_common import Timer
from bench_common import fmt_ms as fmt

try:
    import torchvision
except ImportError:  # pragma: no cover - depends on the machine
    torchvision = None

CUDA_SIZES = [1000, 5000, 20000, 100000]
CPU_SIZES = [1000, 5000, 20000]
CATEGORIES = 80
THRESHOLD = 0.5
# bbox_overlaps shapes (M, N, aligned): anchors vs ground truth, proposals vs proposals, aligned pairs
CUDA_OVERLAP_SHAPES = [(100000, 50, False), (5000, 5000, False), (1000000, 1000000, True)]
CPU_OVERLAP_SHAPES = [(20000, 50, False), (1000, 1000, False), (100000, 100000, True)]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def make_boxes(n: int, device, dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 800
    wh = torch.rand(n, 2, generator=g) * 100
    boxes = torch.cat([xy, xy + wh], 1).to(device=device, dtype=dtype)
    scores = torch.rand(n, generator=g).to(device=device, dtype=dtype)
    idxs = torch.randint(0, CATEGORIES, (n,), generator=g).to(device)
    return boxes, scores, idxs


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


def compare_keep(keep, tv_keep, scores) -> str:
    """"equal", or "equal up to ties" when only boxes of equal score swap places
    (torchvision's batched_nms merges categories with an unstable sort; mmops
    puts the lower index first)."""
    if torch.equal(keep, tv_keep):
        return "equal"
    if (keep.numel() == tv_keep.numel() and torch.equal(keep.sort()[0], tv_keep.sort()[0])
            and torch.equal(scores[keep], scores[tv_keep])):
        return "equal up to ties"
    return "DIFFERS"


def ratio(base: Optional[float], mine: Optional[float]) -> str:
    return "n/a" if base is None or mine is None or mine == 0 else f"{base / mine:.2f}x"


def print_table(rows) -> None:
    header = ["case", "size", "dtype", "mmops ms", "baseline ms", "ratio", "baseline", "check"]
    table = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for k, r in enumerate(table):
        print("  ".join(v.rjust(w) if i in (1, 3, 4, 5) else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--cases", default="nms,batched_nms,bbox_overlaps")
    parser.add_argument("--sizes", default=None, help="comma separated box counts for nms / batched_nms")
    parser.add_argument("--dtypes", default="fp32")
    args = parser.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    iters = args.iters or (50 if cuda else 5)
    warmup = args.warmup or (10 if cuda else 1)
    timer = Timer(device, iters, warmup)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (CUDA_SIZES if cuda else CPU_SIZES)
    cases = args.cases.split(",")
    dtypes = [DTYPES[d] for d in args.dtypes.split(",")]
    print(f"device: {torch.cuda.get_device_name(device) if cuda else 'cpu'} "
          f"({'CUDA events' if cuda else f'{torch.get_num_threads()} threads'}), torch {torch.__version__}, "
          f"torchvision {torchvision.__version__ if torchvision else 'not installed'}, median of {iters}")
    rows, problems = [], []
    for dtype in dtypes:
        dname = str(dtype).replace("torch.", "")
        for n in sizes:
            boxes, scores, idxs = make_boxes(n, device, dtype, seed=n)
            if "nms" in cases:
                keep = torch.ops.mmops.nms(boxes, scores, THRESHOLD)
                base_ms, check = None, "n/a"
                if torchvision is not None:
                    tv_keep = torchvision.ops.nms(boxes, scores, THRESHOLD)
                    check = compare_keep(keep, tv_keep, scores)
                    if check == "DIFFERS":
                        problems.append(f"nms n={n} {dname}: kept indices differ from torchvision")
                    base_ms = timer(lambda: torchvision.ops.nms(boxes, scores, THRESHOLD))
                mine = timer(lambda: torch.ops.mmops.nms(boxes, scores, THRESHOLD))
                rows.append(["nms", n, dname, fmt(mine), fmt(base_ms), ratio(base_ms, mine), "torchvision", check])
            if "batched_nms" in cases:
                keep = torch.ops.mmops.batched_nms(boxes, scores, idxs, THRESHOLD)
                base_ms, check = None, "n/a"
                if torchvision is not None:
                    tv_keep = torchvision.ops.batched_nms(boxes, scores, idxs, THRESHOLD)
                    check = compare_keep(keep, tv_keep, scores)
                    if check == "DIFFERS":
                        problems.append(f"batched_nms n={n} {dname}: kept indices differ from torchvision")
                    base_ms = timer(lambda: torchvision.ops.batched_nms(boxes, scores, idxs, THRESHOLD))
                mine = timer(lambda: torch.ops.mmops.batched_nms(boxes, scores, idxs, THRESHOLD))
                rows.append([f"batched_nms ({CATEGORIES} cat.)", n, dname, fmt(mine), fmt(base_ms),
                             ratio(base_ms, mine), "torchvision", check])
        if "bbox_overlaps" in cases:
            for m, n, aligned in (CUDA_OVERLAP_SHAPES if cuda else CPU_OVERLAP_SHAPES):
                b1, _, _ = make_boxes(m, device, dtype, seed=1)
                b2, _, _ = make_boxes(n, device, dtype, seed=2)
                out = torch.ops.mmops.bbox_overlaps(b1, b2, "iou", aligned, 0)
                ref = overlaps_composite(b1.double(), b2.double(), aligned)
                err = (out.double() - ref).abs().max().item() if out.numel() else 0.0
                tol = {torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 1e-2)
                check = f"max err {err:.1e}"
                if err > tol:
                    problems.append(f"bbox_overlaps {m}x{n} {dname}: max error {err:.2e} > {tol}")
                label = f"{m}" if aligned else f"{m}x{n}"
                name = "bbox_overlaps aligned" if aligned else "bbox_overlaps"
                mine = timer(lambda: torch.ops.mmops.bbox_overlaps(b1, b2, "iou", aligned, 0))
                base = timer(lambda: overlaps_composite(b1, b2, aligned))
                rows.append([name, label, dname, fmt(mine), fmt(base), ratio(base, mine), "torch composite", check])
                # forward + backward w.r.t. both box sets
                x1, x2 = b1.clone().requires_grad_(True), b2.clone().requires_grad_(True)

                def fb(fn):
                    out = fn(x1, x2)
                    torch.autograd.grad(out, (x1, x2), torch.ones_like(out))

                mine = timer(lambda: fb(lambda a, b: torch.ops.mmops.bbox_overlaps(a, b, "iou", aligned, 0)))
                base = timer(lambda: fb(lambda a, b: overlaps_composite(a, b, aligned)))
                rows.append([name + " fwd+bwd", label, dname, fmt(mine), fmt(base), ratio(base, mine),
                             "torch composite", ""])
    print_table(rows)
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
