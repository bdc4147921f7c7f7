"""Benchmark mmops.ms_deform_attn against the plain-PyTorch grid_sample composite.

The baseline is what mmcv runs without its CUDA op (multi_scale_deformable_attn_pytorch):
split value per level, F.grid_sample(bilinear, zeros, align_corners=False) each
level at grid = 2 * loc - 1, multiply by the attention weights and sum. Both run
in the same process on the same inputs. Every (case, dtype) is first checked
against a float64 run of the composite (the "rel err" columns: max |x - ref| /
max |ref| for the output and the value / location / attention gradients; location
coordinates within 1e-4 px of an integer, where d/dx of the bilinear weights
jumps, are left out of the location gradient's), so the benchmark never times
wrong code. Then forward and forward+backward (gradients
of value, sampling_locations and attention_weights for a fixed random output
gradient, as in training) are timed.

The CUDA "encoder" case is Deformable DETR's encoder: B 2, levels 100x150 /
50x75 / 25x38 / 13x19, 8 heads of 32 channels, 4 points, one query per value
row. On the CPU a smaller shape, float32 only. The baseline is the composite.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err
from ms_deform_attn_reference import reference as composite  # the baseline: mmcv's composite, any dtype

import mmops


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    levels: tuple  # (H, W) per level
    heads: int
    head_dim: int
    points: int
    queries: int = 0  # 0: one query per value row (encoder self-attention)

    @property
    def rows(self) -> int:
        return sum(h * w for h, w in self.levels)

    @property
    def num_queries(self) -> int:
        return self.queries or self.rows


DETR_LEVELS = ((100, 150), (50, 75), (25, 38), (13, 19))
CUDA_CASES = [
    Case("encoder", 2, DETR_LEVELS, 8, 32, 4),
    Case("decoder", 2, DETR_LEVELS, 8, 32, 4, queries=300),
]
CPU_CASES = [
    Case("encoder", 1, ((32, 48), (16, 24), (8, 12), (4, 6)), 8, 32, 4),
    Case("decoder", 2, ((50, 75), (25, 38), (13, 19), (7, 10)), 8, 32, 4, queries=300),
]

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Timed and warm-up iterations by default: (cuda, cpu).
ITERS, WARMUP = (50, 10), (10, 2)
# Allowed rel err vs the float64 composite (output, then each gradient); the
# location gradient is a W-scaled sum over channels and loses more in 16-bit.
TOLERANCE = {torch.float32: (1e-4, 1e-3), torch.float16: (5e-3, 3e-2), torch.bfloat16: (3e-2, 1e-1)}


def reference_points(case: Case, gen: torch.Generator) -> torch.Tensor:
    """[B, Q, 1, 1, 1, 2] (x, y) in [0, 1]: the encoder's (Deformable DETR's
    get_reference_points) are the pixel centres of every level, in value's row
    order; the decoder's are random."""
    if case.queries:
        return torch.rand(case.batch, case.queries, 1, 1, 1, 2, generator=gen)
    centres = []
    for h, w in case.levels:
        ys, xs = torch.meshgrid((torch.arange(h) + 0.5) / h, (torch.arange(w) + 0.5) / w, indexing="ij")
        centres.append(torch.stack([xs.reshape(-1), ys.reshape(-1)], -1))
    return torch.cat(centres).view(1, case.rows, 1, 1, 1, 2).expand(case.batch, -1, -1, -1, -1, -1)


def make_inputs(case: Case, seed: int = 0):
    """float32 CPU value, spatial_shapes, level_start_index, locations, weights:
    locations a few pixels (of each level) around each query's reference point,
    some falling outside; softmax-normalised weights."""
    gen = torch.Generator().manual_seed(seed)
    B, M, D, P, Q, L = case.batch, case.heads, case.head_dim, case.points, case.num_queries, len(case.levels)
    value = torch.randn(B, case.rows, M, D, generator=gen)
    shapes = torch.tensor(case.levels, dtype=torch.long)
    sizes = shapes[:, 0] * shapes[:, 1]
    starts = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    ref = reference_points(case, gen)
    # offsets of a few pixels of each level: (x, y) / (W, H)
    norm = torch.stack([shapes[:, 1], shapes[:, 0]], -1).float().view(1, 1, 1, L, 1, 2)
    offsets = torch.randn(B, Q, M, L, P, 2, generator=gen) * 2.0 / norm
    loc = ref + offsets
    attn = torch.randn(B, Q, M, L * P, generator=gen).softmax(-1).view(B, Q, M, L, P)
    return value, shapes, starts, loc, attn


def bench_config(case: Case, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    dtype, device = DTYPES[dtype_name], run.device
    row = FwdBwdRow((case.name, dtype_name))
    value, shapes, starts, loc, attn = make_inputs(case)
    levels = list(case.levels)
    go = torch.randn(
        case.batch, case.num_queries, case.heads * case.head_dim, generator=torch.Generator().manual_seed(1)
    )
    v, lo, a, g = (t.to(device=device, dtype=dtype) for t in (value, loc, attn, go))
    ss, st = shapes.to(device), starts.to(device)

    def mm(v_, lo_, a_):
        return mmops.ms_deform_attn(v_, ss, st, lo_, a_)

    def base(v_, lo_, a_):
        return composite(v_, levels, lo_, a_)

    leaves = [t.detach().clone().requires_grad_(True) for t in (v, lo, a)]

    def fwd_bwd(fn):
        return torch.autograd.grad(fn(*leaves), leaves, g)

    # --- correctness: mmops on the rounded inputs vs the float64 composite -----
    label = f"{case.name}/{dtype_name}"
    try:
        out = mm(*leaves)
        grads = torch.autograd.grad(out, leaves, g)
    except Exception as exc:  # report, and go on with the other rows
        row.check = "ERROR"
        problems.append(f"{label}: mmops raised {type(exc).__name__}: {exc}")
        return row
    ref_leaves = [t.detach().double().requires_grad_(True) for t in (v, lo, a)]
    ref_out = composite(ref_leaves[0], levels, *ref_leaves[1:])
    ref_grads = torch.autograd.grad(ref_out, ref_leaves, g.double())
    # d/dx of a bilinear sample jumps where x crosses an integer pixel: a float32
    # coordinate within rounding of one may floor the other way than float64 and
    # legitimately take the other side's derivative. Such coordinates are left
    # out of the location gradient's error.
    sizes = torch.stack([ss[:, 1], ss[:, 0]], -1).to(torch.float64).view(1, 1, 1, -1, 1, 2)
    pixel = lo.double() * sizes - 0.5
    on_kink = (pixel - pixel.round()).abs() < 1e-4
    ref_loc = torch.where(on_kink, torch.zeros_like(ref_grads[1]), ref_grads[1])
    mm_loc = torch.where(on_kink, torch.zeros_like(ref_loc), grads[1].double())
    errs = [
        rel_err(out, ref_out),
        rel_err(grads[0], ref_grads[0]),
        rel_err(mm_loc, ref_loc),
        rel_err(grads[2], ref_grads[2]),
    ]
    row.check = "/".join(f"{e:.0e}" for e in errs)
    tol_fwd, tol_bwd = TOLERANCE[dtype]
    if errs[0] > tol_fwd or max(errs[1:]) > tol_bwd:
        row.check += " !"
        problems.append(f"{label}: rel err out/value/loc/attn {row.check} (tol {tol_fwd:.0e}/{tol_bwd:.0e})")
    del out, grads, ref_leaves, ref_out, ref_grads

    # --- timing ----------------------------------------------------------------
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(v, lo, a))
        row.base_fwd = timer(lambda: base(v, lo, a))
    row.mm_fb = timer(lambda: fwd_bwd(mm))
    row.base_fb = timer(lambda: fwd_bwd(base))
    return row


def case_line(c: Case) -> str:
    maps = "/".join(f"{h}x{w}" for h, w in c.levels)
    return (
        f"  {c.name:8s} B {c.batch}, levels {maps} (S {c.rows}), heads {c.heads}, head_dim {c.head_dim}, "
        f"points {c.points}, queries {c.num_queries}"
    )


def main() -> int:
    return benchmark_main(
        __doc__,
        "ms_deform_attn benchmark",
        iters=ITERS,
        warmup=WARMUP,
        cases=(CUDA_CASES, CPU_CASES),
        options=[ListOption("dtypes", DTYPES, ["fp32", "bf16"], ["fp32"])],
        bench=bench_config,
        labels=("case", "dtype"),
        baseline="composite",
        check="rel err out/value/loc/attn",
        notes="; composite = per-level F.grid_sample + weighted sum (mmcv's multi_scale_deformable_attn_pytorch); "
        "fwd+bwd = gradients of value, locations and weights",
        case_line=case_line,
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
