"""Benchmark mmops.bias_act against a plain-PyTorch composite in the same process: mmcv's
_bias_act_ref (input + bias broadcast along dim, the activation of torch.nn.functional, a
multiply by gain, torch.clamp: up to four elementwise passes, each a read and a write); its
backward is autograd's through them (and a sum for the bias gradient).

Shapes: StyleGAN2-ADA / StyleGAN3 (batch 8 / 4): the synthesis activations after the
modulated convs of the 32 x 32 block (lrelu with bias, 512 channels) and of the 256 x 256
block (lrelu with bias and StyleGAN3's conv_clamp 256, 128 channels), the mapping network's
[N, 512] layers (lrelu) and a linear layer's bias alone (act linear); CPU: 2 x 64 x 32 x 32.
The distributions: the acts (lrelu, the cheap one; swish and tanh, which read the input /
compute exp in the backward) and clamp or not.

Every row is first checked: the output and the input and bias gradients against the float64
composite (and, on the CPU case, the float64 reference of the tests); then forward and
forward+backward (torch.autograd.grad of input and bias with a fixed output gradient) are
timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from bias_act_reference import bias_act_composite, bias_act_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOL = {"fp32": 1e-5, "fp16": 4e-3, "bf16": 3e-2}  # relative to the largest value
ACT_CHOICES = {"lrelu": "lrelu", "swish": "swish", "tanh": "tanh"}


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple
    act: Optional[str] = None  # None: the --acts option
    clamp: Optional[float] = None


CUDA_CASES = [
    Case("conv_512x32", (8, 512, 32, 32)),
    Case("conv_128x256_clamp", (4, 128, 256, 256), clamp=256.0),
    Case("mapping_512", (8, 512)),
    Case("linear_bias_512x64", (8, 512, 64, 64), act="linear"),
]
CPU_CASES = [Case("cpu_64x32", (2, 64, 32, 32)), Case("cpu_64x32_clamp", (2, 64, 32, 32), clamp=1.0)]


def case_line(case):
    numel = 1
    for s in case.shape:
        numel *= s
    return (
        f"{case.name}: {list(case.shape)}{'' if case.clamp is None else f', clamp {case.clamp:g}'}: "
        f"{numel / 1e6:.2f} M values; floor (fp32) forward 2 x {numel * 4 / 1e6:.1f} MB (read input, write "
        "output), backward 3 x (read grad_output and output or input, write grad_input) plus the bias "
        "reduction's read"
    )


def bench_bias_act(case, acts, dtype_name, run, timer, problems):
    """One row per act of --acts (a case with its own act: that one)."""
    return [bench_one(case, act, dtype_name, run, timer, problems) for act in ([case.act] if case.act else acts)]


def bench_one(case, act, dtype_name, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    scale = 200.0 if case.clamp is not None and case.clamp > 10 else 1.0  # some values reach the clamp
    x = (torch.randn(case.shape, generator=gen) * scale).to(device=device, dtype=dtype).requires_grad_(True)
    b = (torch.randn(case.shape[1], generator=gen) * 0.1).to(device=device, dtype=dtype).requires_grad_(True)
    go = torch.randn(case.shape, generator=gen).to(device=device, dtype=dtype)
    label = act + ("" if case.clamp is None else f" clamp {case.clamp:g}")
    row = FwdBwdRow(("bias_act", "x".join(map(str, case.shape)), label, dtype_name))
    name = f"bias_act/{case.name}/{act}/{dtype_name}"

    def mm(t, c):
        return torch.ops.mmops.bias_act(t, c, 1, act, None, None, case.clamp)

    def base(t, c):
        return bias_act_composite(t, c, 1, act, None, None, case.clamp)

    xd = x.detach().double().requires_grad_(True)
    bd = b.detach().double().requires_grad_(True)
    go_check = go
    if case.clamp is not None:
        # Where the unclamped value lies within rounding of the clamp, whether it was clamped (no
        # gradient) depends on the dtype's rounding: the check leaves those values out of both sides.
        with torch.no_grad():
            unclamped = bias_act_composite(xd, bd, 1, act, None, None, None).abs()
        eps = 4 * torch.finfo(dtype).eps * case.clamp
        go_check = go.masked_fill((unclamped - case.clamp).abs() <= eps, 0)
    try:
        out = mm(x, b)
        gx, gb = torch.autograd.grad(out, (x, b), go_check)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    exp = base(xd, bd)
    ex, eb = torch.autograd.grad(exp, (xd, bd), go_check.double())
    errs = [rel_err(out.double(), exp), rel_err(gx.double(), ex), rel_err(gb.double(), eb)]
    if not run.cuda:
        ref = bias_act_ref(x.detach().cpu(), b.detach().cpu(), 1, act, None, None, case.clamp)
        errs.append(rel_err(out.double().cpu(), ref))
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
        "bias_act benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("acts", ACT_CHOICES, list(ACT_CHOICES), ["lrelu", "swish"], looped=False),
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
        ],
        bench=bench_bias_act,
        labels=("op", "shape", "act", "dtype"),
        baseline="bias + act * gain (+ clamp)",
        check="rel err out/grad x/grad bias vs float64 composite[/ref]",
        case_line=case_line,
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
