"""Benchmark mmops.furthest_point_sample (and _with_dist) against a plain-PyTorch
composite: a Python loop of torch ops over the num_points picks (the picked point's
squared distances, torch.minimum into the kept distances, argmax), in the same process.

Shapes: PointNet++ / 3DSSD SA1 on KITTI (16 clouds x 16384 points -> 4096, the issue's
target), SA2 (16 x 4096 -> 1024); F-FPS on a 16 x 4096 x 4096 distance matrix -> 512.
CPU: 2 x 2048 -> 256. Point distributions: "uniform" (a 80 x 80 x 4 m box) and "lidar"
(most points on a ground plane, the rest in 40 tight clusters: many near-equal
distances). Every configuration first checks that mmops picks the composite's
indices (both follow the same rule in float32); only forward is timed (indices have
no gradient).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main

DISTRIBUTIONS = ("uniform", "lidar")


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    points: int
    num_points: int
    with_dist: bool = False


CUDA_CASES = [
    Case("sa1_16x16384_4096", 16, 16384, 4096),
    Case("sa2_16x4096_1024", 16, 4096, 1024),
    Case("ffps_16x4096_512", 16, 4096, 512, with_dist=True),
]
CPU_CASES = [Case("cpu_2x2048_256", 2, 2048, 256), Case("cpu_ffps_2x1024_128", 2, 1024, 128, with_dist=True)]


def cloud(case, kind, gen):
    b, n = case.batch, case.points
    if kind == "uniform":
        return torch.rand(b, n, 3, generator=gen) * torch.tensor([80.0, 80.0, 4.0]) - torch.tensor([40.0, 40.0, 2.0])
    ground = torch.rand(b, n, 3, generator=gen) * torch.tensor([80.0, 80.0, 0.0]) - torch.tensor([40.0, 40.0, 1.7])
    centres = torch.rand(b, 40, 3, generator=gen) * 60 - 30
    pick = torch.randint(0, 40, (b, n), generator=gen)
    blobs = centres.gather(1, pick.unsqueeze(-1).expand(-1, -1, 3)) + torch.randn(b, n, 3, generator=gen) * 0.3
    return torch.where(torch.rand(b, n, 1, generator=gen) < 0.6, ground, blobs)


def square_matrix(xyz):
    d = xyz.unsqueeze(1) - xyz.unsqueeze(2)
    return (d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) + d[..., 2] * d[..., 2]


def composite(data, num_points, with_dist):
    """The picks by a loop of torch ops (mmops' rule: start at 0, NaN-free data, first maximum)."""
    b, n = data.shape[0], data.shape[1]
    rows = torch.arange(b, device=data.device)
    kept = torch.full((b, n), 1e10, device=data.device, dtype=data.dtype)
    out = torch.zeros(b, num_points, dtype=torch.int32, device=data.device)
    picked = torch.zeros(b, dtype=torch.long, device=data.device)
    for j in range(1, num_points):
        if with_dist:
            d = data[rows, picked]
        else:
            diff = data - data[rows, picked].unsqueeze(1)
            d = (diff[..., 0] * diff[..., 0] + diff[..., 1] * diff[..., 1]) + diff[..., 2] * diff[..., 2]
        kept = torch.minimum(kept, d)
        picked = kept.argmax(dim=1)
        out[:, j] = picked.int()
    return out


def bench_fps(case, kind, run, timer, problems):
    gen = torch.Generator().manual_seed(0)
    xyz = cloud(case, kind, gen).to(run.device)
    data = square_matrix(xyz) if case.with_dist else xyz
    op = torch.ops.mmops.furthest_point_sample_with_dist if case.with_dist else torch.ops.mmops.furthest_point_sample
    name = "furthest_point_sample_with_dist" if case.with_dist else "furthest_point_sample"
    shape = f"{case.batch}x{case.points}->{case.num_points}"
    row = FwdBwdRow((name, shape, "fp32", kind))
    try:
        out = op(data, case.num_points)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}/{case.name}/{kind}: mmops raised {type(exc).__name__}: {exc}")
        return row
    same = (out == composite(data, case.num_points, case.with_dist)).double().mean().item()
    row.check = f"same picks {same:.4f}"
    if same != 1.0:
        row.check += " DIFFERS"
        problems.append(f"{name}/{case.name}/{kind}: {row.check}")
    row.mm_fwd = timer(lambda: op(data, case.num_points))
    row.base_fwd = timer(lambda: composite(data, case.num_points, case.with_dist))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "furthest_point_sample benchmark",
        iters=(10, 2),
        warmup=(2, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS)],
        bench=bench_fps,
        labels=("op", "shape", "dtype", "distribution"),
        baseline="torch loop",
        check="same picks as the composite",
        with_torchvision=False,
        backward=False,
    )


if __name__ == "__main__":
    sys.exit(main())
