"""float64 reference of assign_score_withk (plain torch, shared by the tests and the benchmark)."""

import torch


def assign_score_withk_ref(scores, point_features, center_features, knn_idx):
    """[B, O, npoint, K]: out[b, o, n, k] = sum_m scores[b, n, k, m] *
    (point_features[b, knn[b, n, k], m, o] - center_features[b, knn[b, n, 0], m, o]);
    a pair whose neighbour or center index lies outside [0, N) gives 0 (CUDA's guard).
    Differentiable (gather, then a weighted sum)."""
    n_points = point_features.shape[1]
    idx = knn_idx.long()
    valid = (idx >= 0) & (idx < n_points)
    valid = valid & valid[:, :, :1]  # [B, npoint, K]
    safe = torch.where(valid, idx, torch.zeros_like(idx))
    b = torch.arange(idx.shape[0], device=idx.device)[:, None, None]
    neighbour = point_features[b, safe]  # [B, npoint, K, M, O]
    center = center_features[b, safe[:, :, :1]]  # [B, npoint, 1, M, O]
    out = (scores.unsqueeze(-1) * (neighbour - center)).sum(3)  # [B, npoint, K, O]
    out = out * valid.unsqueeze(-1).to(out.dtype)
    return out.permute(0, 3, 1, 2)


def assign_score_withk_loops(scores, point_features, center_features, knn_idx):
    """The same by explicit loops (small inputs): an independent check of the reference."""
    B, npoint, K, M = scores.shape
    O = point_features.shape[3]
    out = torch.zeros(B, O, npoint, K, dtype=torch.float64)
    for b in range(B):
        for n in range(npoint):
            c = int(knn_idx[b, n, 0])
            for k in range(K):
                p = int(knn_idx[b, n, k])
                for o in range(O):
                    out[b, o, n, k] = sum(
                        float(scores[b, n, k, m])
                        * (float(point_features[b, p, m, o]) - float(center_features[b, c, m, o]))
                        for m in range(M)
                    )
    return out
