"""Benchmark mmops hard_voxelize, dynamic_voxelize and dynamic_scatter against plain-PyTorch
composites (mmcv's kernels are not built here: mmcv-lite has no _ext).

Inputs: --clouds point clouds of --points points each (x, y, z, intensity), KITTI range
[0, -40, -3, 70.4, 40, 1], 0.05 m voxels (0.1 m in z), two distributions:
  uniform  uniform in the range (nearly every point its own voxel);
  lidar    64 rings around the sensor at the range's x = 0 edge, dense near it, about 35%
           of the points behind it or beyond the range (out of range).
Cases:
  hard            hard_voxelize, max_points 5, max_voxels 40000, per cloud (mmdet3d's loop);
                  composite: floor, a sort of the voxel keys, unique / scatter_reduce(amin)
                  for the voxels' first points, ranks inside runs, a scatter into voxels.
  dynamic         dynamic_voxelize per cloud; composite: floor, range mask, where.
  scatter_mean    dynamic_scatter(points, [batch, z, y, x], "mean") of all clouds at once, forward
                  and forward+backward; composite: torch.unique(dim=0, return_inverse),
                  index_add / bincount division (mmcv's CUDA grouping is at::unique_dim too).
Every case is first checked: mmops' outputs must equal the composite's (scatter_mean:
max relative error). ratio = composite ms / mmops ms (> 1: mmops is faster).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err

import mmops  # noqa: F401  (registers torch.ops.mmops)

RANGE = [0.0, -40.0, -3.0, 70.4, 40.0, 1.0]
VOXEL = [0.05, 0.05, 0.1]
MAX_POINTS, MAX_VOXELS = 5, 40000


@dataclass(frozen=True)
class Case:
    name: str  # hard, dynamic, scatter_mean


CASES = [Case("hard"), Case("dynamic"), Case("scatter_mean")]
DISTRIBUTIONS = ListOption("distributions", ["uniform", "lidar"], ["uniform", "lidar"], ["uniform", "lidar"])
POINTS = ListOption("points", None, [120000], [20000], convert=int)
CLOUDS = ListOption("clouds", None, [4], [2], convert=int)


def make_cloud(n: int, distribution: str, seed: int, device) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if distribution == "uniform":
        lo, hi = torch.tensor(RANGE[:3]), torch.tensor(RANGE[3:])
        xyz = lo + torch.rand(n, 3, generator=g) * (hi - lo)
    else:
        ring = torch.randint(0, 64, (n,), generator=g).float()
        r = 2.0 + ring**1.7 * 0.1 + torch.rand(n, generator=g) * 0.05
        theta = torch.rand(n, generator=g) * 6.2832
        z = -1.7 + ring * 0.04 + torch.randn(n, generator=g) * 0.02
        xyz = torch.stack([r * torch.cos(theta), r * torch.sin(theta), z], 1)
    return torch.cat([xyz, torch.rand(n, 1, generator=g)], 1).to(device)


# ----------------------------------------------------------------------------- composites


def composite_dynamic(points: torch.Tensor) -> torch.Tensor:
    lo = torch.tensor(RANGE[:3], device=points.device)
    size = torch.tensor(VOXEL, device=points.device)
    cells = torch.round((torch.tensor(RANGE[3:]) - torch.tensor(RANGE[:3])) / torch.tensor(VOXEL)).to(points.device)
    cell = torch.floor((points[:, :3] - lo) / size)
    inside = ((cell >= 0) & (cell < cells)).all(1, keepdim=True)
    return torch.where(inside, cell.flip(1), -1.0).int()


def composite_hard(points: torch.Tensor):
    n, dev = points.shape[0], points.device
    coors = composite_dynamic(points)
    valid = coors[:, 0] >= 0
    idx = torch.nonzero(valid).squeeze(1)
    c = coors[idx].long()
    cells = [round((hi - lo) / v) for lo, hi, v in zip(RANGE[:3], RANGE[3:], VOXEL)]
    key = (c[:, 0] * cells[1] + c[:, 1]) * cells[0] + c[:, 2]
    sorted_key, perm = torch.sort(key, stable=True)
    uniq, inverse = torch.unique_consecutive(sorted_key, return_inverse=True)
    first = torch.full((uniq.shape[0],), n, device=dev).scatter_reduce(0, inverse, idx[perm], "amin")
    voxel_order = torch.argsort(first)
    voxel_of_run = torch.empty_like(voxel_order)
    voxel_of_run[voxel_order] = torch.arange(uniq.shape[0], device=dev)
    run_start = torch.zeros(uniq.shape[0], dtype=torch.long, device=dev).scatter_reduce(
        0, inverse, torch.arange(perm.shape[0], device=dev), "amin", include_self=False
    )
    rank = torch.arange(perm.shape[0], device=dev) - run_start[inverse]
    voxel = voxel_of_run[inverse]
    keep = (rank < MAX_POINTS) & (voxel < MAX_VOXELS)
    m = min(uniq.shape[0], MAX_VOXELS)
    voxels = points.new_zeros(m, MAX_POINTS, points.shape[1])
    voxels[voxel[keep], rank[keep]] = points[idx[perm[keep]]]
    out_coors = coors[first[voxel_order[:m]]]
    num = torch.bincount(voxel[keep], minlength=m).int()
    return voxels, out_coors, num


def composite_scatter_mean(feats: torch.Tensor, coors: torch.Tensor):
    valid = (coors >= 0).all(1)
    kept, kept_feats = coors[valid], feats[valid]
    voxel_coors, inverse = torch.unique(kept, dim=0, return_inverse=True)
    sums = feats.new_zeros(voxel_coors.shape[0], feats.shape[1]).index_add(0, inverse, kept_feats)
    count = torch.bincount(inverse, minlength=voxel_coors.shape[0]).unsqueeze(1).to(feats.dtype)
    return sums / count, voxel_coors


# ----------------------------------------------------------------------------- the rows


def _fwd_bwd(fn, feats, coors, grad):
    leaf = feats.detach().requires_grad_(True)
    out = fn(leaf, coors)[0]
    out.backward(grad)


def bench(case: Case, distribution: str, points: int, clouds: int, run, timer, problems) -> FwdBwdRow:
    dev = run.device
    cloud_list = [make_cloud(points, distribution, seed=i, device=dev) for i in range(clouds)]
    op = {"hard": "hard_voxelize", "dynamic": "dynamic_voxelize", "scatter_mean": "dynamic_scatter"}[case.name]
    labels = (op, f"{clouds} x {points}", distribution, "fp32")
    if case.name == "hard":
        mm = lambda: [torch.ops.mmops.hard_voxelize(p, VOXEL, RANGE, MAX_POINTS, MAX_VOXELS) for p in cloud_list]  # noqa: E731
        base = lambda: [composite_hard(p) for p in cloud_list]  # noqa: E731
        same = all(all(torch.equal(a, b) for a, b in zip(x, y)) for x, y in zip(mm(), base()))
        check = "equal" if same else "DIFFERS"
    elif case.name == "dynamic":
        mm = lambda: [torch.ops.mmops.dynamic_voxelize(p, VOXEL, RANGE) for p in cloud_list]  # noqa: E731
        base = lambda: [composite_dynamic(p) for p in cloud_list]  # noqa: E731
        check = "equal" if all(torch.equal(a, b) for a, b in zip(mm(), base())) else "DIFFERS"
    else:
        feats = torch.cat(cloud_list)
        batch = torch.cat([torch.full((points, 1), i, dtype=torch.int32, device=dev) for i in range(clouds)])
        coors = torch.cat([batch, torch.cat([composite_dynamic(p) for p in cloud_list])], 1)
        coors[coors[:, 1] < 0] = -1
        out, out_coors = torch.ops.mmops.dynamic_scatter(feats, coors, "mean")
        ref, ref_coors = composite_scatter_mean(feats, coors)
        same = torch.equal(out_coors, ref_coors)
        check = f"{rel_err(out, ref):.1e}" if same else "DIFFERS"
        grad = torch.randn_like(out)
        mm = lambda: torch.ops.mmops.dynamic_scatter(feats, coors, "mean")  # noqa: E731
        base = lambda: composite_scatter_mean(feats, coors)  # noqa: E731
        row = FwdBwdRow(labels, base_fwd=timer(base), mm_fwd=timer(mm), check=check)
        row.base_fb = timer(lambda: _fwd_bwd(composite_scatter_mean, feats, coors, grad))
        row.mm_fb = timer(
            lambda: _fwd_bwd(lambda f, c: torch.ops.mmops.dynamic_scatter(f, c, "mean"), feats, coors, grad)
        )
        if check == "DIFFERS":
            problems.append(f"{labels}: voxel coordinates differ from the composite's")
        return row
    if check == "DIFFERS":
        problems.append(f"{labels}: outputs differ from the composite's")
    return FwdBwdRow(labels, base_fwd=timer(base), mm_fwd=timer(mm), check=check)


def main() -> int:
    return benchmark_main(
        __doc__,
        "voxelization benchmark",
        iters=(50, 3),
        warmup=(10, 1),
        cases=(CASES, CASES),
        options=[DISTRIBUTIONS, POINTS, CLOUDS],
        bench=bench,
        labels=("op", "points", "distribution", "dtype"),
        baseline="composite",
        check="check",
        with_torchvision=False,
        notes=f"; voxel {VOXEL} m, range {RANGE}, hard: max_points {MAX_POINTS}, max_voxels {MAX_VOXELS}",
    )


if __name__ == "__main__":
    sys.exit(main())
