"""Benchmark mmops.filtered_lrelu against a plain-PyTorch composite in the same process:
mmcv's reference path (_filtered_lrelu_ref) written with torch ops: bias, zero insertion by
F.pad of a [.., H, 1, W, 1] view, F.pad for the pads, a depthwise F.conv2d with the flipped
up filter, leaky ReLU times gain, clamp, a depthwise F.conv2d with the flipped down filter,
a strided slice for down (filtered_lrelu_reference.filtered_lrelu_ref in the input's dtype);
its backward is autograd's (cuDNN on CUDA), which keeps the whole intermediate.

Shapes: StyleGAN3-like synthesis layers (config T, 12-tap separable windowed-sinc-like
filters given as their 2-D outer products; clamp 256): up 2 / down 2 layers at 36, 84 and
148 px with 512, 256 and 128 channels, and a critically sampled up 1 / down 1 layer (6-tap
filters); batch 4 or 16. CPU: small versions. Filters: "sinc" (the 12 / 6 taps of a
windowed low-pass) and "random" (same sizes, no symmetry).

Every row is first checked: the output and the gradients of input and bias against the
float64 composite; then forward and forward+backward (torch.autograd.grad with a fixed
output gradient, w.r.t. input and bias) are timed. The floor column of a case line is the
traffic a fused pass cannot avoid: the input read and the output written (forward) and,
for the backward, the mask (1 byte per intermediate sample) written and read, the output
gradient read and the input gradient written.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from filtered_lrelu_reference import filtered_lrelu_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
FILTERS = ("sinc", "random")
TOL = {"fp32": 1e-4, "fp16": 5e-3, "bf16": 3e-2}  # relative to the largest value
SIZES = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2}


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    channels: int
    side: int
    up: int
    down: int
    taps: int
    pad: int

    def mid(self):
        return self.side * self.up + 2 * self.pad - self.taps + 1

    def out(self):
        return (self.mid() - self.taps) // self.down + 1


CUDA_CASES = [
    Case("sg3_up2_512x36", 16, 512, 36, 2, 2, 12, 10),
    Case("sg3_up2_256x84", 4, 256, 84, 2, 2, 12, 10),
    Case("sg3_up2_128x148", 4, 128, 148, 2, 2, 12, 10),
    Case("sg3_crit_256x84", 4, 256, 84, 1, 1, 6, 5),
]
CPU_CASES = [
    Case("cpu_up2_32x24", 2, 32, 24, 2, 2, 12, 10),
    Case("cpu_crit_32x24", 2, 32, 24, 1, 1, 6, 5),
]


def case_line(case):
    planes = case.batch * case.channels
    numel_in, numel_mid, numel_out = planes * case.side**2, planes * case.mid() ** 2, planes * case.out() ** 2
    fwd = (numel_in + numel_out) * 4
    bwd = (numel_out + numel_in) * 4 + numel_mid * 2
    return (
        f"{case.name}: [N, C, H, W] = [{case.batch}, {case.channels}, {case.side}, {case.side}], up {case.up}, "
        f"down {case.down}, {case.taps}-tap filters, padding {case.pad} -> intermediate {case.mid()}^2, output "
        f"{case.out()}^2; floor (fp32) fwd {fwd / 1e6:.1f} MB, bwd {bwd / 1e6:.1f} MB"
    )


def make_taps(kind, n, gen):
    if kind == "sinc":  # a Kaiser-windowed sinc low-pass at a quarter of the sampling rate
        t = torch.arange(n, dtype=torch.float64) - (n - 1) / 2
        f = torch.sinc(t / 2) * torch.kaiser_window(n, periodic=False, beta=4.0, dtype=torch.float64)
    else:
        f = torch.rand(n, generator=gen, dtype=torch.float64) + 0.1
    return (f / f.sum()).float()


def bench_filtered_lrelu(case, dtype_name, filter_kind, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    shape = (case.batch, case.channels, case.side, case.side)
    x = torch.randn(shape, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    b = (torch.randn(case.channels, generator=gen) * 0.2).to(device=device, dtype=dtype).requires_grad_(True)
    taps = make_taps(filter_kind, case.taps, gen)
    fu = (torch.outer(taps, taps) * case.up**2).to(device)
    fd = torch.outer(taps, taps).to(device)
    pad = [case.pad] * 4
    rest = (case.up, case.down, pad, math.sqrt(2), 0.2, 256.0)
    row = FwdBwdRow(
        ("filtered_lrelu", "x".join(map(str, shape)) + f" up{case.up} down{case.down}", dtype_name, filter_kind)
    )
    name = f"filtered_lrelu/{case.name}/{dtype_name}/{filter_kind}"

    def mm(t, bias):
        return torch.ops.mmops.filtered_lrelu(t, fu, fd, bias, *rest)

    def base(t, bias):
        return filtered_lrelu_ref(t, fu, fd, bias, *rest)

    try:
        out = mm(x, b)
        go = torch.randn(out.shape, generator=gen).to(device=device, dtype=dtype)
        grads = torch.autograd.grad(out, [x, b], go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    xd = x.detach().double().requires_grad_(True)
    bd = b.detach().double().requires_grad_(True)
    exp = filtered_lrelu_ref(xd, fu.double(), fd.double(), bd, *rest)
    exp_grads = torch.autograd.grad(exp, [xd, bd], go.double())
    errs = [rel_err(out.double(), exp)] + [rel_err(g.double(), e) for g, e in zip(grads, exp_grads)]
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if any(e > TOL[dtype_name] for e in errs):
        row.check += " !"
        problems.append(f"{name}: rel err {row.check} over {TOL[dtype_name]:.0e}")
    del out, grads, exp, exp_grads, xd, bd
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x, b))
        row.base_fwd = timer(lambda: base(x, b))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x, b), [x, b], go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(x, b), [x, b], go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "filtered_lrelu benchmark",
        iters=(20, 3),
        warmup=(3, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("filters", FILTERS, ["sinc"], ["sinc"]),
        ],
        bench=bench_filtered_lrelu,
        labels=("op", "shape", "dtype", "filters"),
        baseline="conv2d composite",
        check="rel err out/grad input/grad bias vs float64 composite",
        case_line=case_line,
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
