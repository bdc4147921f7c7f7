"""Benchmark mmops.tin_shift against a plain-PyTorch composite in the same process:
torch.gather along T with a time index (t - shift of each channel's group, clamped) and
torch.where zeroing the frames that come from outside [0, T); its backward is gather's
(a scatter-add into zeros).

Shapes: TSM / TIN on ResNet-50 (mmaction2: 8 clips of T = 8 segments, the shift applied in
every residual block on its input): C = 256 at 56 x 56, 512 at 28 x 28, 1024 at 14 x 14,
2048 at 7 x 7, G = 8 channel groups (mmaction2's TIN computes one offset per group). CPU:
2 clips, C = 64 at 14 x 14. Shifts: "tin" (uniform in [-2, 2]: most frames land inside),
"tsm" (TSM's pattern as shifts: group 0 by +1, group 1 by -1, the rest 0) and "far"
(|shift| >= T: everything zero, nothing read).

tin_shift is a copy, so both sides are memory-bound: the floor is 2 * numel * element size
bytes (read the source once, write the result once; the backward the same). Every row is
first checked: the output and the input gradient against the composite's (exact: both
copy values) and, on the CPU case, the float64 loop reference of the tests; then forward
and forward+backward (torch.autograd.grad with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from tin_shift_reference import tin_shift_composite, tin_shift_grad_ref, tin_shift_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
SHIFTS = ("tin", "tsm", "far")


@dataclass(frozen=True)
class Case:
    name: str
    clips: int
    frames: int
    channels: int
    height: int
    width: int
    groups: int = 8


CUDA_CASES = [
    Case("r50_c256_56", 8, 8, 256, 56, 56),
    Case("r50_c512_28", 8, 8, 512, 28, 28),
    Case("r50_c1024_14", 8, 8, 1024, 14, 14),
    Case("r50_c2048_7", 8, 8, 2048, 7, 7),
]
CPU_CASES = [Case("cpu_c64_14", 2, 8, 64, 14, 14)]


def make_shift(case, kind, gen):
    n, g, t = case.clips, case.groups, case.frames
    if kind == "tin":
        return torch.randint(-2, 3, (n, g), generator=gen, dtype=torch.int32)
    if kind == "tsm":
        shift = torch.zeros(n, g, dtype=torch.int32)
        shift[:, 0], shift[:, 1] = 1, -1
        return shift
    return torch.where(torch.rand(n, g, generator=gen) < 0.5, t, -t - 3).to(torch.int32)  # "far"


def case_line(case):
    numel = case.clips * case.frames * case.channels * case.height * case.width
    return (
        f"{case.name}: [N, T, C, H, W] = [{case.clips}, {case.frames}, {case.channels}, {case.height}, "
        f"{case.width}], G = {case.groups}: {numel / 1e6:.1f} M values, floor 2 x {numel * 4 / 1e6:.0f} MB "
        "(fp32) per pass"
    )


def bench_tin_shift(case, dtype_name, shift_kind, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    shape = (case.clips, case.frames, case.channels, case.height, case.width)
    x = torch.randn(shape, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    shift = make_shift(case, shift_kind, gen).to(device)
    go = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    row = FwdBwdRow(("tin_shift", "x".join(map(str, shape)) + f" G {case.groups}", dtype_name, shift_kind))
    name = f"tin_shift/{case.name}/{dtype_name}/{shift_kind}"

    def mm(t):
        return torch.ops.mmops.tin_shift(t, shift)

    def base(t):
        return tin_shift_composite(t, shift)

    try:
        out = mm(x)
        (grad,) = torch.autograd.grad(out, x, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    exp = base(x)
    (exp_grad,) = torch.autograd.grad(exp, x, go)
    errs = [rel_err(out, exp), rel_err(grad, exp_grad)]
    if not run.cuda:  # the loop reference (slow in Python: the CPU case only)
        errs += [rel_err(out.cpu(), tin_shift_ref(x.detach().cpu(), shift.cpu()))]
        errs += [rel_err(grad.cpu(), tin_shift_grad_ref(go.cpu(), shift.cpu()))]
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if any(e != 0 for e in errs):
        row.check += " !"
        problems.append(f"{name}: rel err {row.check} (a copy: expected exactly 0)")
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
        "tin_shift benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("shifts", SHIFTS, SHIFTS, SHIFTS),
        ],
        bench=bench_tin_shift,
        labels=("op", "shape", "dtype", "shifts"),
        baseline="gather composite",
        check="rel err out/grad vs composite[/loop ref out/grad]",
        case_line=case_line,
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
