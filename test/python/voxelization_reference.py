"""Float64-style references of hard_voxelize, dynamic_voxelize and dynamic_scatter in plain
torch and Python loops (shared by the tests, test_properties.py and the benchmark).

The voxel of a point follows mmcv's rule: voxel_size and coors_range rounded to float32,
cell = floor((p - min) / size) per axis computed in float32 (float64 for float64 points),
in range when 0 <= cell < round((max - min) / size) (float32 arithmetic, half away from 0).
"""

import math
from typing import Dict, List, Sequence, Tuple

import torch
from torch import Tensor


def grid_cells(voxel_size: Sequence[float], coors_range: Sequence[float]) -> List[int]:
    """Cells along x, y, z."""
    size = torch.tensor(voxel_size, dtype=torch.float32)
    r = torch.tensor(coors_range, dtype=torch.float32)
    return [math.floor(v + 0.5) for v in ((r[3:] - r[:3]) / size).tolist()]


def point_voxels(points: Tensor, voxel_size: Sequence[float], coors_range: Sequence[float]) -> List[tuple]:
    """(z, y, x) of every point, or None out of range."""
    acc = torch.float64 if points.dtype == torch.float64 else torch.float32
    size = torch.tensor(voxel_size, dtype=torch.float32).to(acc)
    lo = torch.tensor(coors_range[:3], dtype=torch.float32).to(acc)
    cell = torch.floor((points[:, :3].detach().cpu().to(acc) - lo) / size)
    cells = grid_cells(voxel_size, coors_range)
    out = []
    for row in cell.tolist():
        inside = all(0 <= c < n for c, n in zip(row, cells))  # NaN compares False
        out.append((int(row[2]), int(row[1]), int(row[0])) if inside else None)
    return out


def dynamic_voxelize_ref(points: Tensor, voxel_size, coors_range) -> Tensor:
    rows = [v if v is not None else (-1, -1, -1) for v in point_voxels(points, voxel_size, coors_range)]
    return torch.tensor(rows, dtype=torch.int32).reshape(-1, 3)


def hard_voxelize_ref(points: Tensor, voxel_size, coors_range, max_points=35, max_voxels=20000):
    """mmcv's deterministic hard voxelization, point by point."""
    voxels: Dict[tuple, List[int]] = {}  # insertion order = order of the first point
    for i, v in enumerate(point_voxels(points, voxel_size, coors_range)):
        if v is None:
            continue
        if v not in voxels:
            if len(voxels) >= max_voxels:
                continue
            voxels[v] = []
        if len(voxels[v]) < max_points:
            voxels[v].append(i)
    pts = points.detach().cpu()
    out = torch.zeros(len(voxels), max_points, pts.shape[1], dtype=pts.dtype)
    for k, members in enumerate(voxels.values()):
        out[k, : len(members)] = pts[members]
    coors = torch.tensor(list(voxels), dtype=torch.int32).reshape(-1, 3)
    num = torch.tensor([len(m) for m in voxels.values()], dtype=torch.int32)
    return out, coors, num


def scatter_groups(coors: Tensor) -> Tuple[List[tuple], List[List[int]]]:
    """The kept voxels in increasing lexicographic order, and their points by index."""
    groups: Dict[tuple, List[int]] = {}
    for i, row in enumerate(coors.cpu().tolist()):
        if min(row) >= 0:
            groups.setdefault(tuple(row), []).append(i)
    keys = sorted(groups)
    return keys, [groups[k] for k in keys]


def dynamic_scatter_ref(feats: Tensor, coors: Tensor, reduce: str = "max") -> Tuple[Tensor, Tensor]:
    """(voxel_feats [M, C] in float64, voxel_coors [M, D] int32). Max propagates NaN."""
    keys, members = scatter_groups(coors)
    f = feats.detach().cpu().double()
    rows = []
    for idx in members:
        part = f[idx]
        if reduce == "sum":
            rows.append(part.sum(0))
        elif reduce == "mean":
            rows.append(part.sum(0) / len(idx))
        else:
            rows.append(part.amax(0))
    out = torch.stack(rows) if rows else torch.zeros(0, f.shape[1], dtype=torch.float64)
    return out, torch.tensor(keys, dtype=torch.int32).reshape(-1, coors.shape[1])


def dynamic_scatter_grad_ref(feats: Tensor, coors: Tensor, reduce: str, grad_out: Tensor) -> Tensor:
    """d(sum(voxel_feats * grad_out)) / d feats; max: to the lowest-index point of the maximum
    (the first NaN when the voxel holds one)."""
    _, members = scatter_groups(coors)
    f = feats.detach().cpu().double()
    g = grad_out.detach().cpu().double()
    grad = torch.zeros_like(f)
    for v, idx in enumerate(members):
        for c in range(f.shape[1]):
            if reduce == "max":
                values = [f[i, c].item() for i in idx]
                nans = [k for k, x in enumerate(values) if math.isnan(x)]
                best = nans[0] if nans else values.index(max(values))
                grad[idx[best], c] = g[v, c]
            else:
                for i in idx:
                    grad[i, c] = g[v, c] / (len(idx) if reduce == "mean" else 1)
    return grad
