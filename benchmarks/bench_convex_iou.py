"""Benchmark the point-set / polygon ops of Oriented RepPoints (mmrotate) against
plain-PyTorch composites written here (torchvision has none of them):

  convex_iou          N point sets (9 points) x K = 100 gt quadrilaterals
  convex_giou         N aligned pairs, forward and forward + backward
  min_area_polygons   N point sets
  points_in_polygons  N points x M = 100 quadrilaterals

Two input distributions: "random" (point sets, points and quadrilaterals uniform
over an 800 x 800 image: most pairs are disjoint) and "clustered" (detector-like:
every point set / point scattered around one of the quadrilaterals, so most pairs
overlap and the clipping does its full work). Every row is first checked on the same (rounded)
inputs, max abs error (relative to max(area, 1) for min_area_polygons):
- convex_iou / convex_giou: against the exact (Fraction) reference of
  test/python/polygon_reference.py on a subsample (the pairs where mmops and the float64
  composite differ by more than a twentieth of the tolerance, at most the 1024 that differ most,
  and 192 spread over the pairs where either is non-zero), against the
  float64 composite on the other pairs (16-bit inputs round points onto a coarse grid: repeated
  and collinear points, which the composite's brute-force hull does not handle);
- min_area_polygons: the rectangles' areas against the composite's in float64, less what
  rounding the output corners to the output dtype can change an area by (bf16 corners near
  800 px are 4 px apart: that bound is some 25% of an area there, so bf16 rows say little);
- points_in_polygons: the fraction of flags that differ from the composite.

The composites: hull edges by brute force (a pair of points is an edge when every
point is on its left), intersection areas by Green's theorem over the parts of the
hull's and the quadrilateral's edges inside the other polygon (Liang-Barsky against
each half-plane), enclosing hulls the same way, everything batched (chunks of rows),
differentiable by autograd.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main
from polygon_reference import pointset_giou, pointset_iou

import mmops  # noqa: F401  (registers torch.ops.mmops)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}
DISTRIBUTIONS = ["random", "clustered"]
IMAGE = 800.0


@dataclass(frozen=True)
class Case:
    name: str
    op: str
    n: int
    k: int = 100


CUDA_CASES = [
    Case("convex_iou_2000", "convex_iou", 2000),
    Case("convex_iou_20000", "convex_iou", 20000),
    Case("convex_giou_20000", "convex_giou", 20000),
    Case("min_area_polygons_20000", "min_area_polygons", 20000),
    Case("points_in_polygons_100k", "points_in_polygons", 100000),
]
CPU_CASES = [
    Case("convex_iou_2000", "convex_iou", 300, 20),
    Case("convex_giou_20000", "convex_giou", 500),
    Case("min_area_polygons_20000", "min_area_polygons", 500),
    Case("points_in_polygons_100k", "points_in_polygons", 2000, 20),
]
TOLERANCE = {torch.float32: 1e-3, torch.float64: 1e-9}  # max abs error; 16-bit below
EXACT_WORST, EXACT_SPREAD = 1024, 192  # most pairs checked against the exact reference


# ----------------------------------------------------------------------------- inputs


def make_quads(m, device, seed):
    """Rotated rectangles with sides 20..120 px (float64), every other one clockwise."""
    g = torch.Generator().manual_seed(seed)
    c = torch.rand(m, 2, generator=g, dtype=torch.float64) * IMAGE
    wh = torch.rand(m, 2, generator=g, dtype=torch.float64) * 100 + 20
    t = torch.rand(m, generator=g, dtype=torch.float64) * math.pi
    u = torch.stack([t.cos(), t.sin()], 1) * wh[:, :1] / 2
    v = torch.stack([-t.sin(), t.cos()], 1) * wh[:, 1:] / 2
    q = torch.stack([c - u - v, c + u - v, c + u + v, c - u + v], 1)
    q[1::2] = q[1::2].flip(1)
    return q.reshape(m, 8).to(device)


def make_centres(n, quads, distribution, seed):
    g = torch.Generator().manual_seed(seed)
    if distribution == "random":
        return torch.rand(n, 2, generator=g, dtype=torch.float64) * IMAGE
    owner = torch.randint(0, quads.shape[0], (n,), generator=g)
    centre = quads.cpu().reshape(-1, 4, 2).mean(1)[owner]
    return centre + torch.randn(n, 2, generator=g, dtype=torch.float64) * 15


def make_pointsets(n, quads, distribution, seed):
    """9 points per set within +-40 px of its centre (float64)."""
    g = torch.Generator().manual_seed(seed + 1)
    centre = make_centres(n, quads, distribution, seed)
    pts = centre[:, None, :] + (torch.rand(n, 9, 2, generator=g, dtype=torch.float64) - 0.5) * 80
    return pts.reshape(n, 18).to(quads.device)


# ----------------------------------------------------------------------------- composites


def _cross(o, a, b):
    return (a[..., 0] - o[..., 0]) * (b[..., 1] - o[..., 1]) - (a[..., 1] - o[..., 1]) * (b[..., 0] - o[..., 0])


def hull_edges(points):
    """points [R, P, 2] -> the hull's edges as (start [R, E, 2], end [R, E, 2], valid [R, E]),
    E = P * (P - 1) candidate pairs, an edge when every point is strictly left of it or on
    the segment (no repeated points: the benchmark's random inputs have none)."""
    p = points.shape[1]
    i, j = torch.triu_indices(p, p, 1, device=points.device)
    i, j = torch.cat([i, j]), torch.cat([j, i])
    a, b = points[:, i], points[:, j]  # [R, E, 2]
    side = _cross(a[:, :, None], b[:, :, None], points[:, None, :])  # [R, E, P]
    pa, pb = points[:, None] - a[:, :, None], points[:, None] - b[:, :, None]
    on_segment = (pa * pb).sum(-1) <= 0  # between a and b (when collinear)
    ok = (side > 0) | ((side == 0) & on_segment)
    return a, b, ok.all(-1) & ((b - a).abs().sum(-1) > 0)


def inside_interval(a, b, ha, hb, hvalid, strict=False):
    """The part [s0, s1] of segments a -> b [.., S, 2] inside the convex polygon given by
    the half-planes left of ha -> hb [.., H, 2] (only those with hvalid [.., H]); strict:
    a segment on a boundary line is outside (shared boundary counted once)."""
    fa = _cross(ha[..., None, :, :], hb[..., None, :, :], a[..., :, None, :])  # [.., S, H]
    fb = _cross(ha[..., None, :, :], hb[..., None, :, :], b[..., :, None, :])
    hv = hvalid[..., None, :]
    t = fa / torch.where(fa - fb == 0, torch.ones_like(fa), fa - fb)
    lower = torch.where(hv & (fa < 0) & (fb >= 0), t, torch.zeros_like(t)).amax(-1)
    upper = torch.where(hv & (fa >= 0) & (fb < 0), t, torch.ones_like(t)).amin(-1)
    empty = (hv & (fa < 0) & (fb < 0)).any(-1) | (strict & (hv & (fa == 0) & (fb == 0)).any(-1))
    return lower, torch.where(empty, torch.zeros_like(upper), upper)


def clipped_cross(a, b, s0, s1, valid):
    """sum of cross(p(s0), p(s1)) over the segments' inside parts (twice the Green area)."""
    d = b - a
    p0, p1 = a + s0[..., None] * d, a + s1[..., None] * d
    c = p0[..., 0] * p1[..., 1] - p0[..., 1] * p1[..., 0]
    return torch.where(valid & (s1 > s0), c, torch.zeros_like(c)).sum(-1)


def quad_edges(quads):
    """quads [..., 8] -> counter-clockwise edges (start, end) [..., 4, 2] and area."""
    v = quads.reshape(*quads.shape[:-1], 4, 2)
    area = 0.5 * (v[..., 0] * v.roll(-1, -2)[..., 1] - v[..., 1] * v.roll(-1, -2)[..., 0]).sum(-1)
    v = torch.where((area < 0)[..., None, None], v.flip(-2), v)
    return v, v.roll(-1, -2), area.abs()


def hull_quad_areas(ha, hb, hvalid, qa, qb):
    """Hull area A, intersection I (Green's theorem); hull edges [.., E, 2], quad edges [.., 4, 2]."""
    all_q = torch.ones(qa.shape[:-1], dtype=torch.bool, device=qa.device)
    s0, s1 = inside_interval(ha, hb, qa, qb, all_q)
    inter = clipped_cross(ha, hb, s0, s1, hvalid)
    t0, t1 = inside_interval(qa, qb, ha, hb, hvalid, strict=True)
    inter = inter + clipped_cross(qa, qb, t0, t1, torch.ones_like(t0, dtype=torch.bool))
    area = 0.5 * torch.where(hvalid, _cross(torch.zeros_like(ha), ha, hb), torch.zeros_like(ha[..., 0])).sum(-1)
    return area, (0.5 * inter).clamp(min=0)


def convex_iou_composite(pointsets, polygons, chunk=1000):
    out = []
    qa, qb, qarea = quad_edges(polygons)  # [K, 4, 2]
    for start in range(0, pointsets.shape[0], chunk):
        pts = pointsets[start : start + chunk].reshape(-1, 9, 2)
        origin = pts[:, :1]
        a, b, valid = hull_edges(pts - origin)
        e = valid.shape[1]
        ha, hb = a[:, None].expand(-1, len(polygons), e, 2), b[:, None].expand(-1, len(polygons), e, 2)
        hv = valid[:, None].expand(-1, len(polygons), e)
        sa, sb = qa[None] - origin[:, :, None], qb[None] - origin[:, :, None]
        area, inter = hull_quad_areas(ha, hb, hv, sa, sb)
        union = area + qarea[None] - inter
        out.append(torch.where(union > 0, inter / union.clamp(min=1e-30), torch.zeros_like(union)))
    return torch.cat(out) if out else pointsets.new_zeros(0, len(polygons))


def convex_giou_composite(pointsets, polygons):
    pts = pointsets.reshape(-1, 9, 2)
    origin = pts[:, :1]
    pts = pts - origin
    qa, qb, qarea = quad_edges(polygons - origin.repeat(1, 1, 4).reshape(-1, 8))
    a, b, valid = hull_edges(pts)
    area, inter = hull_quad_areas(a, b, valid, qa, qb)
    union = area + qarea - inter
    ea, eb, evalid = hull_edges(torch.cat([pts, qa], 1))
    enclosing = 0.5 * torch.where(evalid, _cross(torch.zeros_like(ea), ea, eb), torch.zeros_like(ea[..., 0])).sum(-1)
    return inter / union - (enclosing - union) / enclosing


def min_area_composite(pointsets):
    """Areas of the minimum rectangles (the check) and the rectangles themselves."""
    pts = pointsets.reshape(-1, 9, 2)
    pts = pts - pts[:, :1]
    a, b, valid = hull_edges(pts)
    d = b - a
    d = d / d.norm(dim=-1, keepdim=True).clamp(min=1e-30)
    x = (pts[:, None] * d[:, :, None]).sum(-1)  # [R, E, 9]
    y = pts[:, None, :, 1] * d[:, :, None, 0] - pts[:, None, :, 0] * d[:, :, None, 1]
    areas = (x.amax(-1) - x.amin(-1)) * (y.amax(-1) - y.amin(-1))
    areas = torch.where(valid, areas, torch.full_like(areas, math.inf))
    best = areas.argmin(1, keepdim=True)
    c = torch.gather(d, 1, best[..., None].expand(-1, 1, 2))[:, 0]
    lo_x, hi_x = x.amin(-1).gather(1, best)[:, 0], x.amax(-1).gather(1, best)[:, 0]
    lo_y, hi_y = y.amin(-1).gather(1, best)[:, 0], y.amax(-1).gather(1, best)[:, 0]
    xs = torch.stack([hi_x, lo_x, lo_x, hi_x], 1)
    ys = torch.stack([lo_y, lo_y, hi_y, hi_y], 1)
    corners = torch.stack([c[:, :1] * xs - c[:, 1:] * ys, c[:, 1:] * xs + c[:, :1] * ys], 2)
    return areas.gather(1, best)[:, 0], corners.reshape(-1, 8) + pointsets[:, :2].repeat(1, 4)


def points_in_polygons_composite(points, polygons):
    """mmcv's crossing rule, batched over [N, M] and the 4 edges."""
    px, py = points[:, None, None, 0], points[:, None, None, 1]
    v = polygons.reshape(1, -1, 4, 2)
    s, t = v, v.roll(1, 2)  # edge i runs from vertex i to vertex i - 1
    sx, sy, tx, ty = s[..., 0], s[..., 1], t[..., 0], t[..., 1]
    in_range = (py >= torch.minimum(sy, ty)) & (py <= torch.maximum(sy, ty))
    on_vertex = ((sx == px) & (sy == py)) | ((tx == px) & (ty == py))
    straddle = ((sy < py) & (ty >= py)) | ((sy >= py) & (ty < py))
    x = sx + (py - sy) * (tx - sx) / torch.where(ty == sy, torch.ones_like(ty), ty - sy)
    stop = in_range & (on_vertex | (straddle & (x == px)))
    crossing = in_range & ~on_vertex & straddle & (x > px)
    before_stop = torch.cumsum(stop.int(), 2) - stop.int() == 0  # edges before the first stop
    count = (crossing & before_stop & ~stop).sum(2)
    return (count % 2).to(points.dtype)


# ----------------------------------------------------------------------------- bench


def bench(case: Case, distribution: str, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    dtype = DTYPES[dtype_name]
    quads64 = make_quads(case.k if case.op != "convex_giou" else 100, run.device, seed=1)
    shape = f"{case.n}x{case.k}" if case.op in ("convex_iou", "points_in_polygons") else f"{case.n}"
    row = FwdBwdRow((case.op, shape, distribution, dtype_name))
    if case.op == "points_in_polygons":
        x64 = make_centres(case.n, quads64, distribution, seed=2).to(run.device)
    else:
        x64 = make_pointsets(case.n, quads64, distribution, seed=2)
    if case.op == "convex_giou":  # aligned: every set with its own quadrilateral
        owner = torch.arange(case.n, device=run.device) % quads64.shape[0]
        quads64 = quads64[owner]
        if distribution == "clustered":
            shift = quads64.reshape(-1, 4, 2).mean(1) - x64.reshape(-1, 9, 2).mean(1)
            x64 = x64 + (shift + torch.randn_like(shift) * 10).repeat(1, 9)
    x, q = x64.to(dtype), quads64.to(dtype)
    mm, base, check = _functions(case.op)
    try:
        out = mm(x, q)
    except Exception as exc:  # report, and go on with the other rows
        row.check = "ERROR"
        problems.append(f"{case.op} {case.name} {dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    err = check(out, x, q)
    tol = TOLERANCE.get(dtype, 5e-2)
    row.check = f"max err {err:.1e}"
    if not err <= tol:
        row.check += " !"
        problems.append(f"{case.op} {shape} {distribution} {dtype_name}: max error {err:.2e} > {tol}")
    del out
    row.mm_fwd = timer(lambda: mm(x, q))
    row.base_fwd = timer(lambda: base(x, q))
    if case.op == "convex_giou":
        leaf = x.clone().requires_grad_(True)

        def fwd_bwd(fn):
            out = fn(leaf, q)
            torch.autograd.grad(out.sum(), leaf)

        row.mm_fb = timer(lambda: fwd_bwd(mm))
        row.base_fb = timer(lambda: fwd_bwd(base))
    return row


def _functions(op):
    """(mmops call, composite call, check(out, x, q) -> max error against the references)."""
    ops = torch.ops.mmops
    if op == "convex_iou":

        def iou_check(o, x, q):
            ref = convex_iou_composite(x.double(), q.double())
            return _exact_checked_err(o, ref, x, q, q.shape[0], pointset_iou)

        return ops.convex_iou, convex_iou_composite, iou_check
    if op == "convex_giou":

        def giou_check(o, x, q):
            return _exact_checked_err(o, convex_giou_composite(x.double(), q.double()), x, q, 0, pointset_giou)

        return lambda x, q: ops.convex_giou(x, q)[0], convex_giou_composite, giou_check
    if op == "min_area_polygons":
        return lambda x, q: ops.min_area_polygons(x), lambda x, q: min_area_composite(x)[1], _min_area_err
    return (
        ops.points_in_polygons,
        points_in_polygons_composite,
        lambda o, x, q: (o.double() != points_in_polygons_composite(x, q).double()).double().mean().item(),
    )


def _exact_checked_err(out, composite_ref, x, q, k, exact):
    """max |out - ref|, ref: the exact reference on the pairs where out and the composite
    differ by more than a twentieth of the tolerance (the EXACT_WORST that differ most) and
    EXACT_SPREAD spread over the pairs where either is non-zero, the composite elsewhere.
    Pair i is (x[i // k], q[i % k]) (k = 0: aligned, (x[i], q[i]))."""
    out, ref = out.double().flatten(), composite_ref.flatten().clone()
    if out.numel() == 0:
        return 0.0
    diff, worst = (out - ref).abs().topk(min(EXACT_WORST, out.numel()))
    worst = worst[diff > TOLERANCE.get(x.dtype, 5e-2) / 20]
    nonzero = ((out != 0) | (ref != 0)).nonzero()[:, 0]
    count = min(EXACT_SPREAD, nonzero.numel())
    spread = nonzero[torch.linspace(0, nonzero.numel() - 1, count, device=nonzero.device).long()]
    picks = torch.cat([worst, spread]).unique()
    sets, quads = (picks // k, picks % k) if k else (picks, picks)
    rows = zip(x.double()[sets].tolist(), q.double()[quads].tolist())
    ref[picks] = torch.tensor([exact(s, p) for s, p in rows], dtype=torch.float64, device=ref.device)
    return (out - ref).abs().max().item()


def _min_area_err(out, x, q):
    """max over rows of (|area - reference| less the rounding slack) / max(reference, 1):
    rounding each output coordinate by half an ulp u of the largest moves each side length
    by <= 2 sqrt(2) u, so the area w h by <= 2 sqrt(2) u (w + h) + 8 u^2."""
    if out.numel() == 0:
        return 0.0
    v = out.double().reshape(-1, 4, 2)
    w, h = (v[:, 0] - v[:, 1]).norm(dim=1), (v[:, 2] - v[:, 1]).norm(dim=1)
    _, exponent = torch.frexp(v.abs().flatten(1).amax(1))  # largest in [2^(e-1), 2^e)
    u = torch.ldexp(torch.full_like(w, torch.finfo(out.dtype).eps / 4), exponent)
    slack = 2 * math.sqrt(2) * u * (w + h) + 8 * u * u
    ref = min_area_composite(x.double())[0]
    return ((((w * h) - ref).abs() - slack).clamp(min=0) / ref.clamp(min=1.0)).max().item()


def main() -> int:
    return benchmark_main(
        __doc__,
        "convex_iou benchmark",
        iters=(20, 2),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
            ListOption("dtypes", DTYPES, ["fp32", "fp16", "bf16"], ["fp32"]),
        ],
        bench=bench,
        labels=("op", "shape", "distribution", "dtype"),
        baseline="composite",
        check="vs exact / float64 refs",
        with_torchvision=False,
        notes="; points_in_polygons check: fraction of differing flags (16-bit inputs round the points)",
    )


if __name__ == "__main__":
    sys.exit(main())
