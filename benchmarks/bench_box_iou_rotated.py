"""Benchmark mmops box_iou_rotated against a plain PyTorch composite
(nms_rotated: bench_nms_rotated.py). torchvision has no rotated IoU (0.29).

Inputs: rotated boxes (cx, cy, w, h, angle) in two distributions: "uniform"
(centres uniform on a 1000 x 1000 image, sides 10 to 60, any angle: most pairs
are disjoint) and "clustered" (detector-like: jittered copies of 100 objects,
most pairs of a cluster overlap). Cases: N x N for N = 5000 and 1000 (CPU:
300, 100) and aligned N pairs (1000000; CPU 20000). The composite is a
vectorised Sutherland-Hodgman clip on [pairs] tensors, in row chunks (its
memory would not fit otherwise), in the input dtype. Every case is first
checked against the composite in float64. Forward only (not differentiable).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main

import mmops  # noqa: F401  (registers torch.ops.mmops)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-9}  # max abs error; 16-bit: 2e-2
PAIRS_PER_CHUNK = 1 << 22  # the composite's working set: ~60 floats per pair


@dataclass(frozen=True)
class Case:
    name: str
    n: int
    distribution: str
    aligned: bool = False


CUDA_CASES = [
    Case("uniform_5000", 5000, "uniform"),
    Case("clustered_5000", 5000, "clustered"),
    Case("uniform_1000", 1000, "uniform"),
    Case("clustered_1000", 1000, "clustered"),
    Case("aligned_clustered", 1000000, "clustered", True),
]
CPU_CASES = [
    Case("uniform_300", 300, "uniform"),
    Case("clustered_300", 300, "clustered"),
    Case("clustered_100", 100, "clustered"),
    Case("aligned_clustered", 20000, "clustered", True),
]


def make_rotated(n: int, distribution: str, device, dtype, seed: int = 0, objects: int = 100):
    """[n, 5] boxes and [n] uniform scores."""
    g = torch.Generator().manual_seed(seed)
    if distribution == "uniform":
        xy = torch.rand(n, 2, generator=g) * 1000
        wh = torch.rand(n, 2, generator=g) * 50 + 10
        a = (torch.rand(n, 1, generator=g) * 2 - 1) * math.pi
        boxes = torch.cat([xy, wh, a], 1)
    else:
        # The same objects for every seed (boxes1 and boxes2 of a case overlap).
        go = torch.Generator().manual_seed(12345)
        obj = torch.cat(
            [
                torch.rand(objects, 2, generator=go) * 1000,
                torch.rand(objects, 2, generator=go) * 50 + 10,
                (torch.rand(objects, 1, generator=go) * 2 - 1) * math.pi,
            ],
            1,
        )
        pick = torch.randint(0, objects, (n,), generator=g)
        jitter = torch.randn(n, 5, generator=g) * torch.tensor([3.0, 3.0, 2.0, 2.0, 0.1])
        boxes = obj[pick] + jitter
        boxes[:, 2:4] = boxes[:, 2:4].abs() + 1
    scores = torch.rand(n, generator=g)
    return boxes.to(device=device, dtype=dtype), scores.to(device=device, dtype=dtype)


# ----------------------------------------------------------------------------- the composite


def _corners(b, ox, oy):
    """[P, 4] x and y corners of [P, 5] boxes relative to the origin (ox, oy)."""
    c, s = torch.cos(b[:, 4]), torch.sin(b[:, 4])
    ux, uy = c * b[:, 2] / 2, s * b[:, 2] / 2
    vx, vy = -s * b[:, 3] / 2, c * b[:, 3] / 2
    x, y = (b[:, 0] - ox)[:, None], (b[:, 1] - oy)[:, None]
    sx = torch.stack([-ux - vx, ux - vx, ux + vx, -ux + vx], 1)
    sy = torch.stack([-uy - vy, uy - vy, uy + vy, -uy + vy], 1)
    return x + sx, y + sy


def _next_index(cnt, k):
    idx = torch.arange(k, device=cnt.device)[None]
    return torch.where(idx + 1 < cnt[:, None], idx + 1, torch.zeros_like(idx)), idx < cnt[:, None]


def _clip(px, py, cnt, ax, ay, bx, by):
    """Sutherland-Hodgman: the part of each polygon (px, py [P, K], cnt [P]) left of a -> b."""
    p, k = px.shape
    nxt, valid = _next_index(cnt, k)
    qx, qy = px.gather(1, nxt), py.gather(1, nxt)
    ex, ey = (bx - ax)[:, None], (by - ay)[:, None]
    dp = ex * (py - ay[:, None]) - ey * (px - ax[:, None])
    dq = ex * (qy - ay[:, None]) - ey * (qx - ax[:, None])
    keep = valid & (dp >= 0)
    cross = valid & (((dp > 0) & (dq < 0)) | ((dp < 0) & (dq > 0)))
    t = torch.where(cross, dp / torch.where(cross, dp - dq, torch.ones_like(dp)), torch.zeros_like(dp))
    cx = torch.stack([px, px + t * (qx - px)], 2).reshape(p, 2 * k)
    cy = torch.stack([py, py + t * (qy - py)], 2).reshape(p, 2 * k)
    cm = torch.stack([keep, cross], 2).reshape(p, 2 * k)
    slot = torch.where(cm, cm.long().cumsum(1) - 1, torch.full_like(cm, 2 * k, dtype=torch.long))
    ox = px.new_zeros(p, 2 * k + 1).scatter(1, slot, cx)[:, :8]
    oy = py.new_zeros(p, 2 * k + 1).scatter(1, slot, cy)[:, :8]
    return ox, oy, cm.sum(1).clamp(max=8)


def _area(px, py, cnt):
    nxt, valid = _next_index(cnt, px.shape[1])
    term = px * py.gather(1, nxt) - px.gather(1, nxt) * py
    return (torch.where(valid, term, torch.zeros_like(term)).sum(1) / 2).clamp(min=0)


def pair_iou_composite(a, b):
    """IoU of the rows of a and b ([P, 5] each) in plain PyTorch ops."""
    ox, oy = (a[:, 0] + b[:, 0]) / 2, (a[:, 1] + b[:, 1]) / 2
    ax, ay = _corners(a, ox, oy)
    bx, by = _corners(b, ox, oy)
    cnt = torch.full((a.shape[0],), 4, dtype=torch.long, device=a.device)
    px, py = torch.cat([ax, ax.new_zeros(ax.shape)], 1), torch.cat([ay, ay.new_zeros(ay.shape)], 1)
    for e in range(4):
        f = (e + 1) % 4
        px, py, cnt = _clip(px, py, cnt, bx[:, e], by[:, e], bx[:, f], by[:, f])
    inter = torch.where(cnt >= 3, _area(px, py, cnt), torch.zeros_like(px[:, 0]))
    area_a, area_b = a[:, 2] * a[:, 3], b[:, 2] * b[:, 3]
    union = area_a + area_b - inter
    return torch.where(
        union > 0, inter / torch.where(union > 0, union, torch.ones_like(union)), torch.zeros_like(union)
    )


def iou_matrix_composite(b1, b2):
    """[N, M] in row chunks of at most PAIRS_PER_CHUNK pairs."""
    n, m = b1.shape[0], b2.shape[0]
    rows = max(1, PAIRS_PER_CHUNK // max(m, 1))
    out = []
    for start in range(0, n, rows):
        chunk = b1[start : start + rows]
        a = chunk[:, None].expand(-1, m, -1).reshape(-1, 5)
        b = b2[None].expand(chunk.shape[0], -1, -1).reshape(-1, 5)
        out.append(pair_iou_composite(a, b).reshape(chunk.shape[0], m))
    return torch.cat(out) if out else b1.new_zeros(0, m)


def aligned_composite(b1, b2):
    return torch.cat(
        [
            pair_iou_composite(b1[s : s + PAIRS_PER_CHUNK], b2[s : s + PAIRS_PER_CHUNK])
            for s in range(0, len(b1), PAIRS_PER_CHUNK)
        ]
    )


# ----------------------------------------------------------------------------- the benchmark


def bench(case: Case, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    dtype = DTYPES[dtype_name]
    b1, _ = make_rotated(case.n, case.distribution, run.device, dtype, seed=1)
    b2, _ = make_rotated(case.n, case.distribution, run.device, dtype, seed=2)
    shape = f"{case.n} aligned" if case.aligned else f"{case.n}x{case.n}"
    row = FwdBwdRow(("box_iou_rotated", case.distribution, shape, dtype_name))
    mm = lambda: torch.ops.mmops.box_iou_rotated(b1, b2, "iou", case.aligned, True)  # noqa: E731
    comp = aligned_composite if case.aligned else iou_matrix_composite
    try:
        out = mm()
    except Exception as exc:  # report, and go on with the other rows
        row.check = "ERROR"
        problems.append(f"box_iou_rotated {case.name} {dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    k = min(case.n, 2000 if case.aligned else 400)  # the float64 check on a corner of the output
    ref = comp(b1[:k].double(), b2[:k].double())
    got = out[:k] if case.aligned else out[:k, :k]
    err = (got.double() - ref).abs().max().item() if ref.numel() else 0.0
    tol = TOLERANCE.get(dtype, 2e-2)
    row.check = f"max err {err:.1e}"
    if err > tol:
        row.check += " !"
        problems.append(f"box_iou_rotated {case.name} {dtype_name}: max error {err:.2e} > {tol}")
    del out
    row.mm_fwd = timer(mm)
    row.base_fwd = timer(lambda: comp(b1, b2))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "box_iou_rotated benchmark",
        iters=(20, 3),
        warmup=(3, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[ListOption("dtypes", DTYPES, ["fp32", "fp16", "bf16"], ["fp32"])],
        bench=bench,
        labels=("op", "boxes", "shape", "dtype"),
        baseline="composite",
        check="vs float64",
        with_torchvision=False,
        backward=False,
        notes="; mode iou, clockwise; the composite: vectorised Sutherland-Hodgman in row chunks",
    )


if __name__ == "__main__":
    sys.exit(main())
