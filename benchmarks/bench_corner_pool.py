"""Benchmark mmops.corner_pool against mmcv 2.x's CornerPool (torch.cummax along the pooled
axis, on the flipped tensor for top / left: what mmcv's CornerPool.forward runs; its backward
is cummax's scatter_add of the output gradient into the argmax positions), in the same process.

CornerNet shapes: the hourglass head of CornerNet / CentripetalNet (2 x 256 x 128 x 128, the
512 x 512 input at stride 4) and a smaller batch of narrower maps (8 x 128 x 64 x 64); CPU:
1 x 64 x 64 x 64. All four modes, NCHW and channels_last, from two input distributions:
"randn" (no ties) and "relu" (ReLU of randn, what the pooling sees after CornerNet's conv +
BN + ReLU: half the values are 0, so ties decide many argmaxes). Every configuration is first
checked: the output equals the composite's exactly, the gradient too (the output gradient is
integer-valued in {-1, 0, 1}, so every sum is exact in every dtype and summation order), and
the first image's output equals the float64 reference of the tests. Then forward and
forward+backward (torch.autograd.grad with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import LAYOUT_OPTION, LAYOUTS, FwdBwdRow, ListOption, benchmark_main, rel_err

# isort: split
from corner_pool_reference import corner_pool_composite, corner_pool_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
MODES = ("top", "bottom", "left", "right")
DISTRIBUTIONS = ("randn", "relu")


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple  # N, C, H, W


CUDA_CASES = [Case("hourglass_128", (2, 256, 128, 128)), Case("narrow_64", (8, 128, 64, 64))]
CPU_CASES = [Case("cpu_64", (1, 64, 64, 64))]


def inputs(case, distribution, dtype, layout, device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(case.shape, generator=gen)
    if distribution == "relu":
        x = x.relu()
    go = torch.randint(-1, 2, case.shape, generator=gen).float()
    x = x.to(device=device, dtype=dtype).contiguous(memory_format=LAYOUTS[layout]).requires_grad_(True)
    return x, go.to(device=device, dtype=dtype)


def bench_corner_pool(case, dtype_name, mode, distribution, layout, run, timer, problems):
    x, go = inputs(case, distribution, DTYPES[dtype_name], layout, run.device)
    n, c, h, w = case.shape
    row = FwdBwdRow(("corner_pool", f"{n}x{c}x{h}x{w}", dtype_name, f"{mode}/{distribution}/{layout}"))
    name = f"corner_pool/{case.name}/{dtype_name}/{mode}/{distribution}/{layout}"

    def mm(t):
        return torch.ops.mmops.corner_pool(t, mode)

    def base(t):
        return corner_pool_composite(t, mode)

    try:
        out = mm(x)
        (grad,) = torch.autograd.grad(out, x, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    exp = base(x)
    (base_grad,) = torch.autograd.grad(exp, x, go)
    ref = corner_pool_ref(x.detach()[:1, :8].cpu(), mode)  # the definition, on a slice
    errs = [rel_err(out[:1, :8].cpu(), ref), rel_err(out, exp), rel_err(grad, base_grad)]
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if any(e != 0 for e in errs):
        row.check += " !"
        problems.append(f"{name}: rel err ref/composite/grad {row.check} (all must be exact)")
    del out, grad, exp, base_grad, ref
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x))
        row.base_fwd = timer(lambda: base(x))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x), x, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(x), x, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "corner_pool benchmark",
        iters=(100, 5),
        warmup=(10, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("modes", MODES, MODES, ("top", "left")),
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
            LAYOUT_OPTION,
        ],
        bench=bench_corner_pool,
        labels=("op", "shape", "dtype", "mode/dist/layout"),
        baseline="cummax",
        check="rel err ref/composite/grad",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
