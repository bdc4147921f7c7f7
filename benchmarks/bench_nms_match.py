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
ratio = baseline ms / mmops ms (> 1: mmops is faster); nms_match has no
backward: forward only. --sizes: the box counts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main

import mmops


@dataclass(frozen=True)
class Case:
    name: str  # the box distribution


CASES = [Case("uniform"), Case("clustered")]
SIZES = ListOption("sizes", None, [1000, 5000, 20000], [1000, 5000, 20000], convert=int)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}
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


def bench(case: Case, n: int, dtype_name: str, run, timer, problems) -> list:
    """Two rows, the op's and the list's, against the same composite timing."""
    dets = make_dets(n, case.name, run.device, DTYPES[dtype_name], seed=n)
    try:
        groups = mmops.nms_match(dets, THRESHOLD)
    except Exception as exc:  # report, and go on with the other rows
        problems.append(f"{case.name} n={n} {dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return [FwdBwdRow((case.name, str(n), dtype_name, api), check="ERROR") for api in ("op", "list")]
    check = "equal" if same_groups(groups, composite_groups(dets, THRESHOLD)) else "DIFFERS"
    if check == "DIFFERS":
        problems.append(f"{case.name} n={n} {dtype_name}: groups differ from the composite")
    base_ms = timer(lambda: composite_groups(dets, THRESHOLD))
    label = f"{case.name} ({len(groups)} groups)"
    op_ms = timer(lambda: torch.ops.mmops.nms_match(dets, THRESHOLD))
    list_ms = timer(lambda: mmops.nms_match(dets, THRESHOLD))
    return [
        FwdBwdRow((label, str(n), dtype_name, api), base_fwd=base_ms, mm_fwd=ms, check=check)
        for api, ms in (("op", op_ms), ("list", list_ms))
    ]


def main() -> int:
    return benchmark_main(
        __doc__,
        "nms_match benchmark",
        iters=(50, 5),
        warmup=(10, 1),
        cases=(CASES, CASES),
        options=[SIZES, ListOption("dtypes", DTYPES, ["fp32"], ["fp32"])],
        bench=bench,
        labels=("case", "size", "dtype", "api"),
        baseline="composite",
        check="groups",
        backward=False,
        with_torchvision=False,
        notes=f"; IoU threshold {THRESHOLD}",
    )


if __name__ == "__main__":
    sys.exit(main())
