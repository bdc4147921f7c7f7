"""Furthest point sampling in plain torch, float64 by default: one vectorised step a pick
(the tests' reference; no pytest)."""

import torch


def fps_reference(dist_rows, n, num_points, dtype=torch.float64):
    """Indices [num_points] of one cloud: dist_rows(p) -> the distances [n] of every point to
    point p (in `dtype`). mmcv's rules: start at 0, keep each point's smallest distance
    (from 1e10; a NaN distance counts as 0), pick the largest, the first one on ties."""
    kept = torch.full((n,), 1e10, dtype=dtype)
    picked, out = 0, [0] if num_points > 0 else []
    for _ in range(1, num_points):
        d = torch.nan_to_num(dist_rows(picked), nan=0.0, posinf=float("inf"), neginf=float("-inf"))
        kept = torch.where(d < kept, d, kept)
        picked = int(torch.argmax(kept))  # the first maximum
        out.append(picked)
    return out


def square_distances_to(points, p):
    """((dx*dx + dy*dy) + dz*dz) of every point of points [n, 3] to point p, in points' dtype."""
    d = points - points[p]
    return (d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]) + d[:, 2] * d[:, 2]


def fps_xyz_reference(points_xyz, num_points, dtype=torch.float64):
    """int32 [B, num_points] for points_xyz [B, N, 3], computed in `dtype`."""
    rows = []
    for cloud in points_xyz.to(dtype):
        rows.append(fps_reference(lambda p, c=cloud: square_distances_to(c, p), cloud.shape[0], num_points, dtype))
    return torch.tensor(rows, dtype=torch.int32).reshape(points_xyz.shape[0], num_points)


def fps_dist_reference(points_dist, num_points, dtype=torch.float64):
    """int32 [B, num_points] for points_dist [B, N, N], computed in `dtype`."""
    rows = []
    for matrix in points_dist.to(dtype):
        rows.append(fps_reference(lambda p, m=matrix: m[p], matrix.shape[0], num_points, dtype))
    return torch.tensor(rows, dtype=torch.int32).reshape(points_dist.shape[0], num_points)
