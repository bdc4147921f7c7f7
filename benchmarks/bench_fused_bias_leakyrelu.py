"""Benchmark mmops.fused_bias_leakyrelu against a plain-PyTorch composite in the same
process: mmcv's bias_leakyrelu_ref (input + bias broadcast along dim 1, F.leaky_relu, a
multiply by scale: three elementwise passes, each a read and a write); its backward is
autograd's through them (and a sum for the bias gradient).

Shapes: StyleGAN2 (batch 8): the activations after the modulated convs of the 32 x 32 and
64 x 64 blocks (512 channels) and of the 256 x 256 block (128 channels, batch 4), and the
mapping network's [N, 512] layers; CPU: 2 x 64 x 32 x 32.

Every row is first checked: the output and the input and bias gradients against the
float64 composite (and, on the CPU case, the float64 loop reference of the tests); then
forward and forward+backward (torch.autograd.grad of input and bias with a fixed output
gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from fused_bias_leakyrelu_reference import fused_bias_leakyrelu_composite, fused_bias_leakyrelu_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOL = {"fp32": 1e-6, "fp16": 2e-3, "bf16": 2e-2}  # relative to the largest value
SQRT2 = 2**0.5


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple


CUDA_CASES = [
    Case("conv_512x32", (8, 512, 32, 32)),
    Case("conv_512x64", (8, 512, 64, 64)),
    Case("conv_128x256", (4, 128, 256, 256)),
    Case("mapping_512", (8, 512)),
]
CPU_CASES = [Case("cpu_64x32", (2, 64, 32, 32))]


def case_line(case):
    numel = 1
    for s in case.shape:
        numel *= s
    return (
        f"{case.name}: {list(case.shape)}: {numel / 1e6:.2f} M values; floor (fp32) forward 2 x "
        f"{numel * 4 / 1e6:.1f} MB (read input, write output), backward 3 x (read grad_output and "
        "output, write grad_input) plus the bias reduction's read"
    )


def bench_fused_bias_leakyrelu(case, dtype_name, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(case.shape, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    b = (torch.randn(case.shape[1], generator=gen) * 0.1).to(device=device, dtype=dtype).requires_grad_(True)
    go = torch.randn(case.shape, generator=gen).to(device=device, dtype=dtype)
    row = FwdBwdRow(("fused_bias_leakyrelu", "x".join(map(str, case.shape)), dtype_name))
    name = f"fused_bias_leakyrelu/{case.name}/{dtype_name}"

    def mm(t, c):
        return torch.ops.mmops.fused_bias_leakyrelu(t, c, 0.2, SQRT2)

    def base(t, c):
        return fused_bias_leakyrelu_composite(t, c, 0.2, SQRT2)

    try:
        out = mm(x, b)
        gx, gb = torch.autograd.grad(out, (x, b), go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    xd = x.detach().double().requires_grad_(True)
    bd = b.detach().double().requires_grad_(True)
    exp = base(xd, bd)
    ex, eb = torch.autograd.grad(exp, (xd, bd), go.double())
    errs = [rel_err(out.double(), exp), rel_err(gx.double(), ex), rel_err(gb.double(), eb)]
    if not run.cuda:
        errs.append(
            rel_err(out.double().cpu(), fused_bias_leakyrelu_ref(x.detach().cpu(), b.detach().cpu(), 0.2, SQRT2))
        )
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if any(e > TOL[dtype_name] for e in errs):
        row.check += " !"
        problems.append(f"{name}: rel err {row.check} over {TOL[dtype_name]:.0e}")
    del out, gx, gb, exp, ex, eb
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x, b))
        row.base_fwd = timer(lambda: base(x, b))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x, b), (x, b), go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(x, b), (x, b), go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "fused_bias_leakyrelu benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"])],
        bench=bench_fused_bias_leakyrelu,
        labels=("op", "shape", "dtype"),
        baseline="bias + leaky_relu * scale",
        check="rel err out/grad x/grad bias vs float64 composite[/loop ref]",
        case_line=case_line,
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
