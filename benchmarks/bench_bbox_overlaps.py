"""Benchmark mmops bbox_overlaps against a plain PyTorch composite (nms /
batched_nms: bench_nms.py).

Inputs: random boxes with sides up to 100 px on an 800 x 800 image (as
bench_nms.py), mode "iou", offset 0, in three shapes: anchors vs ground truth,
proposals vs proposals, and aligned pairs. Every case is first checked against
the composite in float64. Then the forward, and forward + backward w.r.t. both
box sets, are timed in the same run:

  CUDA: CUDA events around each call after warm-up, median.
  CPU:  time.perf_counter, median, torch.get_num_threads() threads, smaller shapes.

ratio = baseline ms / mmops ms (> 1: mmops is faster).

Usage:
  PYTHONPATH=python python benchmarks/bench_bbox_overlaps.py [--device cpu|cuda] [--iters N]
      [--warmup N] [--cases all_pairs,aligned] [--dtypes fp32,fp16] [--quick]

Exit code 1 when a correctness check fails (timings are never asserted).
"""

from __future__ import annotations

import argparse
import sys

import torch
from bench_common import Timer, fmt_ms, fmt_ratio
from bench_nms import device_line, make_boxes, parse_run, report  # the boxes, options and table of bench_nms.py

import mmops  # noqa: F401  (registers torch.ops.mmops)

CASES = ["all_pairs", "aligned"]
# (M, N, aligned): anchors vs ground truth, proposals vs proposals, aligned pairs
CUDA_SHAPES = [(100000, 50, False), (5000, 5000, False), (1000000, 1000000, True)]
CPU_SHAPES = [(20000, 50, False), (1000, 1000, False), (100000, 100000, True)]


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    _, run, wanted, dtypes = parse_run(parser, CASES)
    device, cuda = run.device, run.cuda
    timer = Timer(device, run.iters, run.warmup)
    print(f"{device_line(run)}, median of {run.iters}")
    rows, problems = [], []
    for dtype in dtypes:
        dname = str(dtype).replace("torch.", "")
        for m, n, aligned in CUDA_SHAPES if cuda else CPU_SHAPES:
            if ("aligned" if aligned else "all_pairs") not in wanted:
                continue
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
            rows.append(
                [name, label, dname, fmt_ms(mine), fmt_ms(base), fmt_ratio(base, mine), "torch composite", check]
            )
            # forward + backward w.r.t. both box sets
            x1, x2 = b1.clone().requires_grad_(True), b2.clone().requires_grad_(True)

            def fb(fn):
                out = fn(x1, x2)
                torch.autograd.grad(out, (x1, x2), torch.ones_like(out))

            mine = timer(lambda: fb(lambda a, b: torch.ops.mmops.bbox_overlaps(a, b, "iou", aligned, 0)))
            base = timer(lambda: fb(lambda a, b: overlaps_composite(a, b, aligned)))
            rows.append(
                [
                    name + " fwd+bwd",
                    label,
                    dname,
                    fmt_ms(mine),
                    fmt_ms(base),
                    fmt_ratio(base, mine),
                    "torch composite",
                    "",
                ]
            )
    return report(rows, problems)


if __name__ == "__main__":
    sys.exit(main())
