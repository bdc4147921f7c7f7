"""Benchmark mmops' diff_iou_rotated_2d / _3d against a plain-PyTorch composite, in the same process.

The composite (test/python/diff_iou_rotated_reference.py) is the candidate-vertex
method mmcv uses, in torch ops: the corners of each box inside the other plus
the 16 edge-edge crossings, sorted by angle around their mean (argsort where
mmcv has a CUDA sort kernel), the shoelace formula; gradients by autograd.
torchvision has no rotated IoU.

Pairs: B x N aligned pairs (a rotated-IoU loss over the matched boxes of a
detector). Distributions: "overlap" (box2 = box1 moved by <= 10% of its size,
sizes and angles jittered: training near convergence) and "random" (centres
up to 3 box sizes apart, any angle: many misses and partial overlaps).
Each configuration is first checked on the same (rounded) inputs, errors relative to the
largest value, 1e-4 for fp32, 2e-2 for fp16 / bf16:
- IoU: against the exact (Fraction) reference on a subsample (the pairs where mmops and the
  float64 composite differ by more than a twentieth of the tolerance, at most the 1024 that
  differ most, and 128 spread over all pairs), against the float64
  composite on the other pairs (the composite breaks on degenerate configurations: collinear
  edges, shared corners; the exact reference does not);
- gradient: against the float64 composite's autograd on the pairs that are not degenerate:
  no corner of one box within 1e-6 x the coordinates' scale of an edge of the other (shared
  corners, corners on edges, collinear edges: the IoU is not differentiable there, or only
  just, and float32 rounding picks a side), and, 3-D, no two of the boxes' z extents' ends
  that close; the check column says how many pairs that skipped ("skip 12").
Then forward and forward+backward (torch.autograd.grad of the summed IoU) are timed.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err
from diff_iou_rotated_reference import box_corners, composite_iou_2d, composite_iou_3d, exact_iou_2d, exact_iou_3d

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DISTRIBUTIONS = ("overlap", "random")
EXACT_WORST, EXACT_SPREAD = 1024, 128  # most pairs checked against the exact reference
DEGENERATE_EPS = 1e-6  # relative to the coordinates' scale: ~8 float32 ulps


@dataclass(frozen=True)
class Case:
    name: str  # the op
    batch: int
    pairs: int

    @property
    def three_d(self) -> bool:
        return self.name.endswith("3d")


CUDA_CASES = [
    Case(op, b, n)
    for op in ("diff_iou_rotated_2d", "diff_iou_rotated_3d")
    for b, n in ((1, 10000), (16, 10000), (16, 100000))
]
CPU_CASES = [Case(op, b, n) for op in ("diff_iou_rotated_2d", "diff_iou_rotated_3d") for b, n in ((1, 2000), (4, 2000))]


def make_pairs(case: Case, distribution: str, seed: int = 0):
    """[B, N, 5 or 7] float64 pairs of the distribution."""
    g = torch.Generator().manual_seed(seed)
    shape = (case.batch, case.pairs)
    dims = 3 if case.three_d else 2

    def rand(*extra):
        return torch.rand(*shape, *extra, generator=g, dtype=torch.float64)

    size = 1 + 9 * rand(dims)
    centre = 100 * rand(dims)
    angle = (2 * rand(1) - 1) * math.pi
    if distribution == "overlap":
        size2 = size * (0.9 + 0.2 * rand(dims))
        centre2 = centre + 0.1 * size * (2 * rand(dims) - 1)
        angle2 = angle + 0.2 * (2 * rand(1) - 1)
    else:
        size2 = 1 + 9 * rand(dims)
        centre2 = centre + 3 * size * (2 * rand(dims) - 1)
        angle2 = (2 * rand(1) - 1) * math.pi
    return torch.cat([centre, size, angle], -1), torch.cat([centre2, size2, angle2], -1)


def _segment_distances(p, a, b):
    """Distances [..., P, E] of points p [..., P, 2] from segments a -> b [..., E, 2]."""
    p, a, b = p[..., :, None, :], a[..., None, :, :], b[..., None, :, :]
    d = b - a
    t = (((p - a) * d).sum(-1) / (d * d).sum(-1).clamp(min=1e-300)).clamp(0, 1)
    return (p - a - t[..., None] * d).norm(dim=-1)


def degenerate(b1, b2, three_d):
    """[B, N] bool (float64 boxes): pairs at or next to a configuration where the IoU is not
    differentiable (a corner on the other box's edge, shared corners, collinear edges; 3-D:
    z extents sharing an end), where float32 rounding and the composite may pick other sides."""
    cols = [0, 1, 3, 4, 6] if three_d else [0, 1, 2, 3, 4]
    c1, c2 = box_corners(b1[..., cols]), box_corners(b2[..., cols])
    scale = 1 + torch.cat([c1, c2], -2).abs().flatten(-2).amax(-1)
    near = torch.minimum(
        _segment_distances(c1, c2, c2.roll(-1, -2)).flatten(-2).amin(-1),
        _segment_distances(c2, c1, c1.roll(-1, -2)).flatten(-2).amin(-1),
    )
    out = near < DEGENERATE_EPS * scale
    if three_d:
        ends1 = torch.stack([b1[..., 2] - b1[..., 5] / 2, b1[..., 2] + b1[..., 5] / 2], -1)
        ends2 = torch.stack([b2[..., 2] - b2[..., 5] / 2, b2[..., 2] + b2[..., 5] / 2], -1)
        gap = (ends1[..., :, None] - ends2[..., None, :]).abs().flatten(-2).amin(-1)
        zscale = 1 + torch.cat([ends1, ends2], -1).abs().amax(-1)
        out |= gap < DEGENERATE_EPS * zscale
    return out


def forward_error(out, composite_ref, b1, b2, exact, tol):
    """rel_err of the IoU against the exact reference on the pairs where mmops and the
    composite differ by more than tol / 20 (relative; the EXACT_WORST that differ most) and
    EXACT_SPREAD pairs spread over all, the composite elsewhere."""
    out, ref = out.detach().double().flatten(), composite_ref.detach().double().flatten().clone()
    n = out.numel()
    if n == 0:
        return 0.0
    diff, worst = (out - ref).abs().topk(min(EXACT_WORST, n))
    worst = worst[diff > tol / 20 * ref.abs().max().clamp(min=1e-12)]
    spread = torch.linspace(0, n - 1, min(EXACT_SPREAD, n), device=out.device).long()
    picks = torch.cat([worst, spread]).unique()
    rows1, rows2 = b1.double().reshape(n, -1)[picks].tolist(), b2.double().reshape(n, -1)[picks].tolist()
    exact_values = [exact(r1, r2) for r1, r2 in zip(rows1, rows2)]
    ref[picks] = torch.tensor(exact_values, dtype=torch.float64, device=ref.device)
    return rel_err(out, ref)


def bench(case, distribution, dtype_name, run, timer, problems):
    dtype, device = DTYPES[dtype_name], run.device
    b1, b2 = (t.to(device=device, dtype=dtype) for t in make_pairs(case, distribution))
    op = torch.ops.mmops.diff_iou_rotated_3d if case.three_d else torch.ops.mmops.diff_iou_rotated_2d
    composite = composite_iou_3d if case.three_d else composite_iou_2d
    row = FwdBwdRow((case.name, f"{case.batch}x{case.pairs} {distribution}", dtype_name, "-"))
    r1, r2 = b1.detach().clone().requires_grad_(True), b2.detach().clone().requires_grad_(True)
    try:
        out = op(r1, r2)
        grads = torch.autograd.grad(out.sum(), (r1, r2))
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{case.name}/{distribution}/{dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    d1, d2 = b1.double().requires_grad_(True), b2.double().requires_grad_(True)
    ref = composite(d1, d2)
    ref_grads = torch.autograd.grad(ref.sum(), (d1, d2))
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    fwd_err = forward_error(out, ref, b1, b2, exact_iou_3d if case.three_d else exact_iou_2d, tol)
    keep = ~degenerate(d1.detach(), d2.detach(), case.three_d)
    skipped = int(keep.numel() - keep.sum().item())
    bwd_err = max(rel_err(g[keep], r[keep]) for g, r in zip(grads, ref_grads))
    row.check = f"{fwd_err:.0e}/{bwd_err:.0e} skip {skipped}"
    if fwd_err > tol or bwd_err > tol:
        row.check += " !"
        problems.append(
            f"{case.name}/{distribution}/{dtype_name}: IoU rel err {fwd_err:.2e} (exact reference / float64 "
            f"composite), grad rel err {bwd_err:.2e} (float64 composite, {skipped} degenerate pairs skipped) "
            f"(tol {tol:.0e})"
        )
    with torch.no_grad():
        row.mm_fwd = timer(lambda: op(b1, b2))
        row.base_fwd = timer(lambda: composite(b1, b2))
    row.mm_fb = timer(lambda: torch.autograd.grad(op(r1, r2).sum(), (r1, r2)))
    row.base_fb = timer(lambda: torch.autograd.grad(composite(r1, r2).sum(), (r1, r2)))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "diff_iou_rotated benchmark",
        iters=(50, 3),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
            ListOption("dtypes", DTYPES, ["fp32", "fp16", "bf16"], ["fp32"]),
        ],
        bench=bench,
        baseline="composite",
        check="rel err fwd/bwd, skipped",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
