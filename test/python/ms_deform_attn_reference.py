"""Independent float64 reference for mmops::ms_deform_attn: mmcv's
multi_scale_deformable_attn_pytorch written with plain torch ops (no mmops).
Used by test_ms_deform_attn.py and benchmarks/bench_ms_deform_attn.py."""

import torch
import torch.nn.functional as F


def reference(value, shapes, loc, attn):
    """Plain-PyTorch multi-scale deformable attention (mmcv's
    multi_scale_deformable_attn_pytorch): split value per level, grid_sample
    each level (bilinear, zeros, align_corners=False) at grid = 2 * loc - 1,
    weight and sum. Differentiable; shapes is a list of (H, W)."""
    B, S, M, D = value.shape
    _, Q, _, L, P, _ = loc.shape
    per_level = value.split([h * w for h, w in shapes], dim=1)
    grid = 2 * loc - 1
    samples = []
    for lvl, (h, w) in enumerate(shapes):
        v = per_level[lvl].flatten(2).transpose(1, 2).reshape(B * M, D, h, w)
        g = grid[:, :, :, lvl].transpose(1, 2).flatten(0, 1)  # [B*M, Q, P, 2]
        samples.append(F.grid_sample(v, g, mode="bilinear", padding_mode="zeros", align_corners=False))
    a = attn.transpose(1, 2).reshape(B * M, 1, Q, L * P)
    out = (torch.stack(samples, dim=-2).flatten(-2) * a).sum(-1)  # [B*M, D, Q]
    return out.view(B, M * D, Q).transpose(1, 2).contiguous()
