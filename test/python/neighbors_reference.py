"""Float64 brute-force references of the neighbour queries and three_interpolate
(plain torch, no pytest), shared by the tests and the benchmarks. Squared
distances are dx*dx + dy*dy + dz*dz in that order, as the kernels compute them."""

import math

import torch


def squared_distances(centers, points):
    """[..., M, 3] x [..., N, 3] -> [..., M, N] in the input dtype."""
    d = centers.unsqueeze(-2) - points.unsqueeze(-3)
    dx, dy, dz = d.unbind(-1)
    return dx * dx + dy * dy + dz * dz


def _fill_ball(hits, sample_num, empty_first):
    """mmcv's fill: hits in order, then the first hit repeated; no hit: zeros
    (empty_first replaces slot 0 then, -1 for the stacked query)."""
    row = [int(h) for h in hits[:sample_num]]
    if not row:
        return [empty_first] + [0] * (sample_num - 1) if sample_num else []
    return row + [row[0]] * (sample_num - len(row))


def ball_query_ref(min_radius, max_radius, sample_num, xyz, center_xyz):
    d2 = squared_distances(center_xyz.double(), xyz.double())  # [B, npoint, N]
    min2, max2 = float(min_radius) ** 2, float(max_radius) ** 2
    inside = (d2 == 0) | ((d2 >= min2) & (d2 < max2))
    out = [
        [_fill_ball(inside[b, i].nonzero().flatten().tolist(), sample_num, 0) for i in range(inside.shape[1])]
        for b in range(inside.shape[0])
    ]
    return torch.tensor(out, dtype=torch.int32).reshape(center_xyz.shape[0], center_xyz.shape[1], sample_num)


def stack_ball_query_ref(max_radius, sample_num, xyz, center_xyz, xyz_batch_cnt, center_xyz_batch_cnt):
    rows, p0, c0 = [], 0, 0
    for n, m in zip(xyz_batch_cnt.tolist(), center_xyz_batch_cnt.tolist()):
        d2 = squared_distances(center_xyz[c0 : c0 + m].double(), xyz[p0 : p0 + n].double())
        inside = d2 < float(max_radius) ** 2
        rows += [_fill_ball(inside[i].nonzero().flatten().tolist(), sample_num, -1) for i in range(m)]
        p0, c0 = p0 + n, c0 + m
    return torch.tensor(rows, dtype=torch.int32).reshape(center_xyz.shape[0], sample_num)


def nearest_ref(centers, points, k):
    """(squared distances, indices) [B, M, k] of the k nearest: ascending, ties to the
    lower index (stable sort), NaN last; slots beyond N: index 0, distance +inf."""
    d2 = squared_distances(centers.double(), points.double())
    idx = torch.sort(d2, dim=-1, stable=True).indices  # torch sorts NaN after +inf
    dist = torch.gather(d2, -1, idx)
    b, m, n = d2.shape
    if n < k:
        idx = torch.cat([idx, torch.zeros(b, m, k - n, dtype=idx.dtype)], -1)
        dist = torch.cat([dist, torch.full((b, m, k - n), math.inf, dtype=torch.float64)], -1)
    return dist[..., :k], idx[..., :k].to(torch.int32)


def knn_ref(k, xyz, center_xyz=None, transposed=False):
    if center_xyz is None:
        center_xyz = xyz
    if transposed:
        xyz, center_xyz = xyz.transpose(1, 2), center_xyz.transpose(1, 2)
    return nearest_ref(center_xyz, xyz, k)[1].transpose(1, 2).contiguous()


def three_nn_ref(target, source):
    d2, idx = nearest_ref(target, source, 3)
    return d2.sqrt(), idx


def three_interpolate_ref(features, indices, weight):
    b, c, m = features.shape
    n = indices.shape[1]
    idx = indices.long().reshape(b, 1, n * 3).expand(b, c, n * 3)
    picked = torch.gather(features.double(), 2, idx).reshape(b, c, n, 3)
    return (picked * weight.double().unsqueeze(1)).sum(-1)
