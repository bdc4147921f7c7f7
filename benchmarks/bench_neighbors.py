"""Benchmark the point-cloud neighbour ops of mmdet3d's PointNet++ family against
plain-PyTorch composites written here (cdist + topk / masks, gather; torchvision has
none of them):

  ball_query         SA layer: B x N points -> npoint centres, radius 0.2, 32 samples
  knn                k = 16 neighbours of every point (DGCNN / PAConv)
  three_nn           feature propagation: B x N targets <- M sources
  three_interpolate  feature propagation: C channels, forward and forward + backward

Two point distributions: "uniform" (the unit cube) and "scene" (scene-like: 70% of
the points on a ground plane, 30% in 32 tight object clusters, so balls and
neighbourhoods are very uneven). Centres / targets are a random subset of the points
(as farthest point sampling would pick them). Every row is first checked against the
composite on the same inputs: the fraction of differing indices (distances within a
rounding of each other may rank differently; the composite's cdist rounds through a
sqrt) or, for three_interpolate, the max relative error.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err

import mmops  # noqa: F401  (registers torch.ops.mmops)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}
DISTRIBUTIONS = ["uniform", "scene"]
CHUNK = 1 << 27  # elements of one composite distance block


@dataclass(frozen=True)
class Case:
    name: str
    op: str
    b: int
    n: int  # points (ball_query, knn) / targets (three_nn, three_interpolate)
    m: int  # centres (ball_query) / sources (three_nn, three_interpolate); knn: = n
    k: int = 0  # sample_num / k / channels
    radius: float = 0.2


CUDA_CASES = [
    Case("ball_query_sa1", "ball_query", 16, 16384, 4096, 32),
    Case("knn_16", "knn", 16, 8192, 8192, 16),
    Case("three_nn_fp", "three_nn", 16, 4096, 1024),
    Case("three_interpolate_fp", "three_interpolate", 16, 4096, 1024, 128),
]
CPU_CASES = [
    Case("ball_query_sa1", "ball_query", 2, 2048, 256, 32),
    Case("knn_16", "knn", 2, 1024, 1024, 16),
    Case("three_nn_fp", "three_nn", 2, 1024, 256),
    Case("three_interpolate_fp", "three_interpolate", 2, 1024, 256, 32),
]


# ----------------------------------------------------------------------------- inputs


def make_points(b, n, distribution, device, seed):
    """[b, n, 3] float64 in the unit cube."""
    g = torch.Generator().manual_seed(seed)
    pts = torch.rand(b, n, 3, generator=g, dtype=torch.float64)
    if distribution == "scene":
        ground = torch.rand(b, n, generator=g) < 0.7
        pts[..., 2] = torch.where(ground, pts[..., 2] * 0.02, pts[..., 2])
        centres = torch.rand(b, 32, 3, generator=g, dtype=torch.float64) * 0.9 + 0.05
        owner = torch.randint(0, 32, (b, n), generator=g)
        blob = torch.gather(centres, 1, owner[..., None].expand(-1, -1, 3))
        blob = blob + torch.randn(b, n, 3, generator=g, dtype=torch.float64) * 0.03
        pts = torch.where(ground[..., None], pts, blob)
    return pts.to(device)


def subset(points, m, seed):
    g = torch.Generator().manual_seed(seed)
    pick = torch.randperm(points.shape[1], generator=g)[:m].to(points.device)
    return points[:, pick].contiguous()


# ----------------------------------------------------------------------------- composites


def _squared(c, x):
    return torch.cdist(c, x, compute_mode="donot_use_mm_for_euclid_dist").square()


def _chunks(b, m, n):
    return max(1, CHUNK // max(1, b * n)), m


def ball_query_composite(min_r, max_r, samples, xyz, centres):
    """The first `samples` points of every ball in index order: a running count of the
    points inside places each of the first `samples` at its slot (the rest go to a
    spare slot that is dropped); empty slots repeat the first point (0 if none)."""
    b, m, n = centres.shape[0], centres.shape[1], xyz.shape[1]
    step, _ = _chunks(b, m, n)
    out = []
    arange = torch.arange(n, device=xyz.device)
    for s in range(0, m, step):
        d2 = _squared(centres[:, s : s + step], xyz)
        inside = (d2 == 0) | ((d2 >= min_r * min_r) & (d2 < max_r * max_r))
        rank = inside.cumsum(-1, dtype=torch.int32)
        slot = torch.where(inside & (rank <= samples), rank - 1, samples).long()
        idx = torch.full((*slot.shape[:2], samples + 1), n, dtype=torch.long, device=xyz.device)
        idx = idx.scatter_(-1, slot, arange.expand_as(slot))[..., :samples]
        first = idx[..., :1]
        idx = torch.where(idx == n, torch.where(first == n, 0, first), idx)
        out.append(idx.int())
    return torch.cat(out, 1)


def nearest_composite(centres, xyz, k):
    b, m, n = centres.shape[0], centres.shape[1], xyz.shape[1]
    step, _ = _chunks(b, m, n)
    dist, idx = [], []
    for s in range(0, m, step):
        d, i = _squared(centres[:, s : s + step], xyz).topk(k, dim=-1, largest=False, sorted=True)
        dist.append(d)
        idx.append(i.int())
    return torch.cat(dist, 1), torch.cat(idx, 1)


def knn_composite(k, xyz):
    return nearest_composite(xyz, xyz, k)[1].transpose(1, 2).contiguous()


def three_nn_composite(target, source):
    d2, idx = nearest_composite(target, source, 3)
    return d2.sqrt(), idx


def three_interpolate_composite(features, indices, weight):
    b, c, _ = features.shape
    n = indices.shape[1]
    picked = features.gather(2, indices.long().reshape(b, 1, n * 3).expand(b, c, n * 3)).reshape(b, c, n, 3)
    return (picked * weight.unsqueeze(1)).sum(-1)


# ----------------------------------------------------------------------------- bench


def _mismatch(a, b):
    return (a != b).double().mean().item() if a.numel() else 0.0


def bench(case: Case, distribution: str, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    dtype = DTYPES[dtype_name]
    pts = make_points(case.b, case.n if case.op in ("ball_query", "knn") else case.m, distribution, run.device, 1)
    shape = {
        "ball_query": f"{case.b}x{case.n}->{case.m} r{case.radius} s{case.k}",
        "knn": f"{case.b}x{case.n} k{case.k}",
        "three_nn": f"{case.b}x{case.n}<-{case.m}",
        "three_interpolate": f"{case.b}x{case.k}x{case.n}<-{case.m}",
    }[case.op]
    row = FwdBwdRow((case.op, shape, distribution, dtype_name))
    x = pts.to(dtype)
    if case.op == "ball_query":
        c = subset(x, case.m, 2)
        mm = lambda: torch.ops.mmops.ball_query(0.0, case.radius, case.k, x, c)  # noqa: E731
        base = lambda: ball_query_composite(0.0, case.radius, case.k, x.float(), c.float())  # noqa: E731
        err, tol = _mismatch(mm(), base()), 1e-3
    elif case.op == "knn":
        mm = lambda: torch.ops.mmops.knn(case.k, x)  # noqa: E731
        base = lambda: knn_composite(case.k, x.float())  # noqa: E731
        err, tol = _mismatch(mm(), base()), 1e-2
    else:
        target = make_points(case.b, case.n, distribution, run.device, 3).to(dtype)
        if case.op == "three_nn":
            mm = lambda: torch.ops.mmops.three_nn(target, x)  # noqa: E731
            base = lambda: three_nn_composite(target.float(), x.float())  # noqa: E731
            err, tol = _mismatch(mm()[1], base()[1]), 1e-2
        else:
            _, idx = torch.ops.mmops.three_nn(target, x)
            g = torch.Generator().manual_seed(4)
            feats = torch.randn(case.b, case.k, case.m, generator=g).to(run.device, dtype)
            w = torch.rand(case.b, case.n, 3, generator=g).to(run.device, dtype)
            mm = lambda: torch.ops.mmops.three_interpolate(feats, idx, w)  # noqa: E731
            base = lambda: three_interpolate_composite(feats, idx, w)  # noqa: E731
            err, tol = rel_err(mm().float(), three_interpolate_composite(feats.float(), idx, w.float())), 2e-2
            leaf = feats.clone().requires_grad_(True)

            def fwd_bwd(fn):
                torch.autograd.grad(fn(leaf, idx, w).sum(), leaf)

            row.mm_fb = timer(lambda: fwd_bwd(torch.ops.mmops.three_interpolate))
            row.base_fb = timer(lambda: fwd_bwd(three_interpolate_composite))
    row.check = f"{'rel err' if case.op == 'three_interpolate' else 'differ'} {err:.1e}"
    if not err <= tol:
        row.check += " !"
        problems.append(f"{case.op} {shape} {distribution} {dtype_name}: {err:.2e} > {tol}")
    row.mm_fwd = timer(mm)
    row.base_fwd = timer(base)
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "neighbors benchmark",
        iters=(20, 2),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
            ListOption("dtypes", DTYPES, ["fp32", "fp16"], ["fp32"]),
        ],
        bench=bench,
        labels=("op", "shape", "distribution", "dtype"),
        baseline="composite",
        check="vs composite",
        with_torchvision=False,
        notes="; composites run in float32 (16-bit rows: their inputs upcast)",
    )


if __name__ == "__main__":
    sys.exit(main())
