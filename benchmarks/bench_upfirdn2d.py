"""Benchmark mmops.upfirdn2d against a plain-PyTorch composite in the same process:
mmcv's upfirdn2d_native (zero insertion by F.pad of a [.., H, 1, W, 1] view, F.pad for
the pads, a depthwise F.conv2d with the flipped kernel, a strided slice for down); its
backward is conv2d's (cuDNN on CUDA).

Shapes: StyleGAN2 (256 x 256 and 1024 x 1024 configs, batch 4): the upsample of a
512-channel 64 x 64 map (up 2, the 4 x 4 [1, 3, 3, 1] kernel times 4, pad (2, 1)), the
discriminator's downsample of a 128-channel 256 x 256 map (down 2, pad (1, 1)) and the blur
after a transposed modulated conv (up 1, 4 x 4, pad (1, 1) on a 512-channel 65 x 65 map);
CPU: 2 x 32 channels at 32 x 32. Kernels: "binomial" ([1, 3, 3, 1]^2: StyleGAN2) and
"random" (a 4 x 4 random kernel: same work, no symmetry).

Every row is first checked: the output and the input gradient against the float64 composite
(and, on the CPU case, the float64 loop reference of the tests); then forward and
forward+backward (torch.autograd.grad with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from upfirdn2d_reference import upfirdn2d_composite, upfirdn2d_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
KERNELS = ("binomial", "random")
TOL = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 2e-2}  # relative to the largest value


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    channels: int
    height: int
    width: int
    up: int
    down: int
    pad: tuple  # (x0, x1, y0, y1)


CUDA_CASES = [
    Case("up2_512x64", 4, 512, 64, 64, 2, 1, (2, 1, 2, 1)),
    Case("down2_128x256", 4, 128, 256, 256, 1, 2, (1, 1, 1, 1)),
    Case("blur_512x65", 4, 512, 65, 65, 1, 1, (1, 1, 1, 1)),
]
CPU_CASES = [
    Case("cpu_up2_32", 2, 32, 32, 32, 2, 1, (2, 1, 2, 1)),
    Case("cpu_down2_32", 2, 32, 32, 32, 1, 2, (1, 1, 1, 1)),
]


def out_side(case, side):
    return (side * case.up + case.pad[0] + case.pad[1] - 4) // case.down + 1


def case_line(case):
    numel_in = case.batch * case.channels * case.height * case.width
    numel_out = case.batch * case.channels * out_side(case, case.height) * out_side(case, case.width)
    floor = (numel_in + numel_out) * 4
    return (
        f"{case.name}: [N, C, H, W] = [{case.batch}, {case.channels}, {case.height}, {case.width}], up {case.up}, "
        f"down {case.down}, pad {case.pad}, 4 x 4 kernel -> {out_side(case, case.height)} x "
        f"{out_side(case, case.width)}; floor (read input + write output, fp32) {floor / 1e6:.1f} MB per pass"
    )


def make_kernel(kind, gen):
    if kind == "binomial":
        t = torch.tensor([1.0, 3.0, 3.0, 1.0])
        k = torch.outer(t, t)
        return k / k.sum() * 4.0
    return torch.randn(4, 4, generator=gen) / 4


def bench_upfirdn2d(case, dtype_name, kernel_kind, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    shape = (case.batch, case.channels, case.height, case.width)
    x = torch.randn(shape, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    k = make_kernel(kernel_kind, gen).to(device)
    up, down, pad = [case.up, case.up], [case.down, case.down], list(case.pad)
    row = FwdBwdRow(("upfirdn2d", "x".join(map(str, shape)) + f" up{case.up} down{case.down}", dtype_name, kernel_kind))
    name = f"upfirdn2d/{case.name}/{dtype_name}/{kernel_kind}"

    def mm(t):
        return torch.ops.mmops.upfirdn2d(t, k, up, down, pad)

    def base(t):
        return upfirdn2d_composite(t, k, up, down, pad)

    try:
        out = mm(x)
        go = torch.randn(out.shape, generator=gen).to(device=device, dtype=dtype)
        (grad,) = torch.autograd.grad(out, x, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    xd = x.detach().double().requires_grad_(True)
    exp = upfirdn2d_composite(xd, k.double(), up, down, pad)
    (exp_grad,) = torch.autograd.grad(exp, xd, go.double())
    errs = [rel_err(out.double(), exp), rel_err(grad.double(), exp_grad)]
    if not run.cuda:  # the loop reference (slow in Python: one image, 4 channels)
        sub = x.detach()[:1, :4].cpu()
        errs.append(rel_err(out[:1, :4].double().cpu(), upfirdn2d_ref(sub, k.cpu(), up, down, pad)))
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if any(e > TOL[dtype_name] for e in errs):
        row.check += " !"
        problems.append(f"{name}: rel err {row.check} over {TOL[dtype_name]:.0e}")
    del out, grad, exp, exp_grad
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x))
        row.base_fwd = timer(lambda: base(x))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x), x, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(x), x, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "upfirdn2d benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("kernels", KERNELS, KERNELS, ["binomial"]),
        ],
        bench=bench_upfirdn2d,
        labels=("op", "shape", "dtype", "kernel"),
        baseline="conv2d composite",
        check="rel err out/grad vs float64 composite[/loop ref]",
        case_line=case_line,
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
