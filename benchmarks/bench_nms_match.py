"""Benchmark mmops nms_match against a plain-PyTorch composite (mmcv's nms_match
runs on the CPU only; its GPU users copy the boxes to the host).

Inputs: N boxes on an 800 x 800 image, uniform scores, IoU threshold 0.5, two
distributions:
  uniform    corners uniform on the image, sides up to 100 px;
  clustered  N / 20 objects, each box a jittered copy (sigma 4 px) of one of
             them, sides 40-60 px: large groups, as PISA's proposals.
Baseline: the IoU matrix of the score-sorted boxes (torch ops on the device,
row blocks), its ">= threshold" mask copied to the host, then the greedy
grouping in a Python loop. Every case is first checked: mmops' groups must equal
the composite's. Rows:
  nms_match (op)    torch.ops.mmops.nms_match: the [N, 2] rows;
  nms_match (list)  mmops.nms_match: mmcv's list of index tensors (splitting the
                    rows reads the group sizes on the host).
Timing as bench_nms.py (CUDA events or perf_counter, median). ratio = baseline
ms / mmops ms (> 1: mmops is faster).

Usage:
  PYTHONPATH=python python benchmarks/bench_nms_match.py [--device cpu|cuda] [--iters N]
      [--warmup N] [--cases uniform,clustered] [--sizes 1000,5000] [--dtypes fp32] [--quick]

Exit code 1 when a correctness check fails (timings are never asserted).
"""

from __future__ import annotations

import argparse
import sys

import torch
from bench_common import Timer, fmt_ms, fmt_ratio
from bench_nms import device_line, parse_run, report

import mmops

CASES = ["uniform", "clustered"]
SIZES = [1000, 5000, 20000]
THRESHOLD = 0.5
BLOCK = 2048  # IoU rows per block of the composite


def make_dets(n: int, case: str, device, dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if case == "uniform":
        xy = torch.rand(n, 2, generator=g) * 800
        wh = torch.rand(n, 2, generator=g) * 100
    else:
        centre = torch.rand(max(1, n // 20), 2, generator=g) * 750
        xy = centre[torch.randint(0, centre.shape[0], (n,), generator=g)] + torch.randn(n, 2, generator=g) * 4
        wh = 40 + torch.rand(n, 2, generator=g) * 20
    scores = torch.rand(n, 1, generator=g)
    return torch.cat([xy, xy + wh, scores], 1).to(device=device, dtype=dtype)


def composite_groups(dets: torch.Tensor, thr: float) -> list:
    """nms_match in plain PyTorch: the >= thr IoU mask in score order, then a Python loop."""
    n = dets.shape[0]
    order = torch.sort(dets[:, 4], descending=True, stable=True)[1]
    b = dets[order, :4]
    b = b.float() if b.dtype in (torch.float16, torch.bfloat16) else b
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    mask = torch.empty(n, n, dtype=torch.bool)
    for s in range(0, n, BLOCK):
        r = b[s : s + BLOCK]
        w = (torch.minimum(r[:, None, 2], b[None, :, 2]) - torch.maximum(r[:, None, 0], b[None, :, 0])).clamp(min=0)
        h = (torch.minimum(r[:, None, 3], b[None, :, 3]) - torch.maximum(r[:, None, 1], b[None, :, 1])).clamp(min=0)
        inter = w * h
        mask[s : s + BLOCK] = (inter / (area[s : s + BLOCK, None] + area[None] - inter) >= thr).cpu()
    order_cpu = order.cpu()
    grouped = torch.zeros(n, dtype=torch.bool)
    flags = [False] * n
    groups = []
    for s in range(n):
        if flags[s]:
            continue
        members = torch.nonzero(mask[s, s + 1 :] & ~grouped[s + 1 :]).squeeze(1) + (s + 1)
        grouped[members] = True
        for m in members.tolist():
            flags[m] = True
        groups.append(order_cpu[torch.cat([torch.tensor([s]), members])].to(dets.device))
    return groups


def same_groups(a: list, b: list) -> bool:
    return len(a) == len(b) and all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(a, b))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=None, help="comma separated box counts")
    args, run, wanted, dtypes = parse_run(parser, CASES)
    timer = Timer(run.device, run.iters, run.warmup)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else SIZES
    print(f"{device_line(run)}, median of {run.iters}, iou_threshold {THRESHOLD}")
    rows, problems = [], []
    for dtype in dtypes:
        dname = str(dtype).replace("torch.", "")
        for n in sizes:
            for case in [c for c in CASES if c in wanted]:
                dets = make_dets(n, case, run.device, dtype, seed=n)
                groups = mmops.nms_match(dets, THRESHOLD)
                check = "equal" if same_groups(groups, composite_groups(dets, THRESHOLD)) else "DIFFERS"
                if check == "DIFFERS":
                    problems.append(f"{case} n={n} {dname}: groups differ from the composite")
                base_ms = timer(lambda: composite_groups(dets, THRESHOLD))
                label = f"{case} ({len(groups)} groups)"
                op_ms = timer(lambda: torch.ops.mmops.nms_match(dets, THRESHOLD))
                list_ms = timer(lambda: mmops.nms_match(dets, THRESHOLD))
                for what, ms in (("op", op_ms), ("list", list_ms)):
                    rows.append(
                        [
                            f"{label} {what}",
                            n,
                            dname,
                            fmt_ms(ms),
                            fmt_ms(base_ms),
                            fmt_ratio(base_ms, ms),
                            "composite",
                            check,
                        ]
                    )
    return report(rows, problems)


if __name__ == "__main__":
    sys.exit(main())
