"""References of chamfer_distance (plain torch, shared by the tests and the benchmark)."""

import math

import torch


def chamfer_distance_ref(xyz1, xyz2):
    """(dist1, dist2, idx1, idx2) by the full [B, N, M] distance matrix, in the inputs' dtype
    (products rounded before the sum, as the kernels); torch.min returns the first minimum:
    the lowest index wins ties. Finite inputs only (torch.min propagates NaN)."""
    diff = xyz1[:, :, None, :] - xyz2[:, None, :, :]
    d = diff[..., 0] * diff[..., 0] + diff[..., 1] * diff[..., 1]
    dist1, idx1 = d.min(2)
    dist2, idx2 = d.min(1)
    return dist1, dist2, idx1.int(), idx2.int()


def chamfer_dist_of(xyz1, xyz2, idx1, idx2):
    """(dist1, dist2) recomputed from the indices: differentiable, for reference gradients."""
    b = torch.arange(xyz1.shape[0], device=xyz1.device)[:, None]
    dist1 = ((xyz1 - xyz2[b, idx1.long()]) ** 2).sum(-1)
    dist2 = ((xyz2 - xyz1[b, idx2.long()]) ** 2).sum(-1)
    return dist1, dist2


def nearest_loops(query, points):
    """(dist, idx) of one query point by a Python scan: the lowest index among equal
    distances; NaN loses to every number; all NaN -> (NaN, 0)."""
    best, best_i = None, -1
    for j, (x, y) in enumerate(points):
        d = (query[0] - x) ** 2 + (query[1] - y) ** 2
        if best_i < 0 or d < best or (math.isnan(best) and not math.isnan(d)):
            best, best_i = d, j
    return best, best_i
