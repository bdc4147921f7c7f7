"""Benchmark mmops.carafe against a plain-PyTorch composite (F.unfold + einsum, the
float64 reference of the tests run in the benchmark's dtype), in the same process.

The CARAFE FPN upsampler (mmdet's carafe FPN: CARAFEPack(256, 2), up_kernel 5,
up_group 1): batch 2, C 256, features 25x38 -> 50x76, 50x76 -> 100x152 and
100x152 -> 200x304 (CUDA); CPU: C 64, the first two levels. Masks are softmax
normalised over the 25 taps, from two distributions: "flat" (logits N(0, 0.1):
near-uniform weights) and "peaked" (logits N(0, 4): one tap dominates).
NCHW and channels_last inputs. Every configuration is checked first against the
float64 reference on the same (rounded) values: output, features and masks
gradients, relative error at most 1e-5 (float32) or 2e-2 (16-bit). Then forward
and forward+backward (torch.autograd.grad of both inputs with a fixed output
gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import LAYOUT_OPTION, FwdBwdRow, ListOption, benchmark_main, rel_err
from carafe_reference import carafe_reference

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DISTRIBUTIONS = {"flat": 0.1, "peaked": 4.0}  # std of the mask logits


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple  # N, C, H, W of the features
    kernel_size: int = 5
    group_size: int = 1
    scale_factor: int = 2


CUDA_CASES = [Case(f"fpn_{h}x{w}", (2, 256, h, w)) for h, w in ((25, 38), (50, 76), (100, 152))]
CPU_CASES = [Case(f"fpn_{h}x{w}", (2, 64, h, w)) for h, w in ((25, 38), (50, 76))]


def carafe_inputs(case, logit_std, seed=0):
    """float32 CPU features, masks (softmax over each group's taps) and an output gradient."""
    gen = torch.Generator().manual_seed(seed)
    n, c, h, w = case.shape
    k, g, s = case.kernel_size, case.group_size, case.scale_factor
    features = torch.randn(case.shape, generator=gen)
    logits = torch.randn(n, g, k * k, h * s, w * s, generator=gen) * logit_std
    masks = logits.softmax(dim=2).reshape(n, g * k * k, h * s, w * s)
    grad_out = torch.randn(n, c, h * s, w * s, generator=gen)
    return features, masks, grad_out


def bench_carafe(case, dtype_name, distribution, layout, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    feats, masks, go = carafe_inputs(case, DISTRIBUTIONS[distribution])
    f = feats.to(device=device, dtype=dtype).contiguous(memory_format=fmt).requires_grad_(True)
    m = masks.to(device=device, dtype=dtype).contiguous(memory_format=fmt).requires_grad_(True)
    go = go.to(device=device, dtype=dtype)
    opts = (case.kernel_size, case.group_size, case.scale_factor)
    n, c, h, w = case.shape
    label = f"{n}x{c}x{h}x{w} -> {h * case.scale_factor}x{w * case.scale_factor}, k{opts[0]} g{opts[1]}"
    row = FwdBwdRow(("carafe", label, dtype_name, f"{distribution}/{layout}"))

    def fwd_bwd(fn):
        return torch.autograd.grad(fn(f, m, *opts), (f, m), go)

    try:
        out = torch.ops.mmops.carafe(f, m, *opts)
        grads = torch.autograd.grad(out, (f, m), go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"carafe/{case.name}/{dtype_name}/{layout}: mmops raised {type(exc).__name__}: {exc}")
        return row
    # reference: float64 on the same rounded values
    fr, mr = f.detach().double().requires_grad_(True), m.detach().double().requires_grad_(True)
    ref = carafe_reference(fr, mr, *opts)
    ref_grads = torch.autograd.grad(ref, (fr, mr), go.double())
    errs = [rel_err(out, ref)] + [rel_err(a, b) for a, b in zip(grads, ref_grads)]
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if max(errs) > tol:
        row.check += " !"
        problems.append(f"carafe/{case.name}/{dtype_name}/{layout}: rel err out/grad f/grad m {row.check} (tol {tol})")
    del out, grads, fr, mr, ref, ref_grads
    with torch.no_grad():
        row.mm_fwd = timer(lambda: torch.ops.mmops.carafe(f, m, *opts))
        row.base_fwd = timer(lambda: carafe_reference(f, m, *opts))
    row.mm_fb = timer(lambda: fwd_bwd(torch.ops.mmops.carafe))
    row.base_fb = timer(lambda: fwd_bwd(carafe_reference))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "carafe benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("distributions", DISTRIBUTIONS, list(DISTRIBUTIONS), list(DISTRIBUTIONS)),
            LAYOUT_OPTION,
        ],
        bench=bench_carafe,
        baseline="unfold+einsum",
        check="rel err out/gf/gm",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
