"""Benchmark mmops.correlation against a plain-PyTorch composite in the same process:
zero padding, then per displacement one shifted product of the two maps summed over C
and the kernel window summed by conv2d with a ones kernel (stride, dilation), the P * P
maps concatenated; its backward is autograd's through those ops.

Shapes: PWC-Net's cost volumes (max_displacement 4: 81 displacements, kernel 1, on the
pyramid of a 448 x 1024 pair, batch 8: level 2 (1/4) 112 x 256 x 32 channels, level 3
(1/8) 56 x 128 x 64, level 5 (1/32) 14 x 32 x 128) and FlowNetC's (kernel 1,
max_displacement 10 with dilation_patch 2: displacements up to 20 pixels in steps of 2,
441 of them, on 256-channel features at 1/8 of 384 x 512, batch 8). CPU: one small PWC
level. Layouts: contiguous NCHW, or both inputs channels-last (made contiguous inside).

Every configuration is first checked: output and both input gradients (first sample of
the batch) against the float64 composite, and on the CPU case the float64 loop reference;
then forward and forward+backward (torch.autograd.grad w.r.t. both inputs with a fixed
output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import LAYOUT_OPTION, LAYOUTS, FwdBwdRow, ListOption, benchmark_main, rel_err

# isort: split
from correlation_reference import correlation_composite, correlation_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# tolerance of the checks (relative to the largest value): sums over C * taps products
TOL = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 2e-2}


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    channels: int
    height: int
    width: int
    max_displacement: int
    dilation_patch: int = 1
    kernel_size: int = 1


CUDA_CASES = [
    Case("pwc_l2", 8, 32, 112, 256, 4),
    Case("pwc_l3", 8, 64, 56, 128, 4),
    Case("pwc_l5", 8, 128, 14, 32, 4),
    Case("flownetc", 8, 256, 48, 64, 10, dilation_patch=2),
]
CPU_CASES = [Case("cpu_pwc", 1, 16, 14, 32, 3)]


def options_of(case):
    k, dp = case.kernel_size, case.dilation_patch
    return ((k, k), case.max_displacement, (1, 1), (0, 0), (1, 1), (dp, dp))


def bench_correlation(case, dtype_name, layout, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    shape = (case.batch, case.channels, case.height, case.width)
    fmt = LAYOUTS[layout]
    x1 = torch.randn(shape, generator=gen).to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    x2 = torch.randn(shape, generator=gen).to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    x1.requires_grad_(True)
    x2.requires_grad_(True)
    options = options_of(case)
    k, md, s, p, d, dp = options
    args = (list(k), md, list(s), list(p), list(d), list(dp))
    patch = 2 * md + 1
    label = f"{'x'.join(map(str, shape))} P {patch}x{patch}" + (f" dp {dp[0]}" if dp[0] > 1 else "")
    row = FwdBwdRow(("correlation", label, dtype_name, layout))
    name = f"correlation/{case.name}/{dtype_name}/{layout}"

    def mm(a, b):
        return torch.ops.mmops.correlation(a, b, *args)

    def base(a, b):
        return correlation_composite(a, b, *options)

    try:
        out = mm(x1, x2)
        go = torch.randn(out.shape, generator=gen).to(device=device, dtype=dtype)
        g1, g2 = torch.autograd.grad(out, (x1, x2), go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    # float64 on the first sample of the same rounded values
    a = x1.detach()[:1].double().requires_grad_(True)
    b = x2.detach()[:1].double().requires_grad_(True)
    exp = base(a, b)
    e1, e2 = torch.autograd.grad(exp, (a, b), go[:1].double())
    errs = [rel_err(out[:1], exp), rel_err(g1[:1], e1), rel_err(g2[:1], e2)]
    if not run.cuda:  # the loop reference (slow in Python: the CPU case only)
        errs.append(rel_err(out[:1].cpu(), correlation_ref(a.detach().cpu(), b.detach().cpu(), *options)))
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if any(e > TOL[dtype_name] for e in errs):
        row.check += " !"
        problems.append(f"{name}: rel err {row.check} (tolerance {TOL[dtype_name]:.0e})")
    del out, g1, g2, exp, e1, e2
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x1, x2))
        row.base_fwd = timer(lambda: base(x1, x2))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x1, x2), (x1, x2), go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(x1, x2), (x1, x2), go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "correlation benchmark",
        iters=(30, 3),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]), LAYOUT_OPTION],
        bench=bench_correlation,
        labels=("op", "shape", "dtype", "layout"),
        baseline="shift+conv composite",
        check="rel err out/grad1/grad2 vs f64 composite[/loop ref]",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
