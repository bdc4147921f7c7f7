"""Benchmark mmops.modulated_deform_conv2d (and deform_conv2d) against
torchvision.ops.deform_conv2d.

Both run in the same process on the same inputs (3x3 kernel, stride 1,
padding 1, bias, one deform group, offsets ~N(0, 2) pixels, mask in (0, 1)).
Every configuration is first checked for correctness, so the benchmark never
times wrong code: mmops' output and every gradient (input, offset, mask,
weight, bias) against torchvision in float64 on the same rounded inputs (the
"rel err" column: the worst max|mmops - ref| / max|ref| over the output and
the gradients). Then forward and forward+backward are timed (backward:
torch.autograd.grad w.r.t. every input with a fixed random output gradient).

dtypes:
  fp32/tf32  float32 with torch.backends.cudnn.allow_tf32 = True (PyTorch's
             default): mmops' matrix products are 1x1 cuDNN convolutions and
             follow the same TF32 rule as nn.Conv2d
  fp32/ieee  float32 with torch.backends.cudnn.allow_tf32 = False (full float32
             products, as torchvision's cuBLAS GEMMs by default)
  bf16, fp16 the column buffers in the input dtype (tensor cores), float
             accumulation; torchvision rows where it has a kernel
The "conv2d fwd ms" column is F.conv2d of the same shape, dtype and layout: a
lower bound for the forward. On the CPU smaller shapes, fp32/ieee only. The
baseline is torchvision.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from bench_common import LAYOUT_OPTION, LAYOUTS, FwdBwdRow, ListOption, benchmark_main, fmt_ms, rel_err, torchvision_op

import mmops

tv_deform_conv2d = torchvision_op("deform_conv2d")  # without it only mmops is timed (and not checked)


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple  # N, C_in, H, W
    out_channels: int


CUDA_CASES = [
    Case("2x256x100x168", (2, 256, 100, 168), 256),
    Case("8x64x128x128", (8, 64, 128, 128), 64),
]
CPU_CASES = [
    Case("1x32x40x48", (1, 32, 40, 48), 32),
    Case("4x16x32x32", (4, 16, 32, 32), 16),
]
KERNEL, PADDING = 3, 1

# name -> (dtype, cudnn.allow_tf32)
DTYPES = {
    "fp32/tf32": (torch.float32, True),
    "fp32/ieee": (torch.float32, False),
    "bf16": (torch.bfloat16, None),
    "fp16": (torch.float16, None),
}
OPS = ("modulated", "plain")
# Timed and warm-up iterations by default: (cuda, cpu).
ITERS, WARMUP = (50, 10), (10, 2)
# Allowed worst relative error (max |mmops - float64 ref| / max |ref|) per dtype name.
TOLERANCE = {"fp32/tf32": 1e-2, "fp32/ieee": 2e-4, "bf16": 1e-1, "fp16": 2e-2}


@contextlib.contextmanager
def cudnn_tf32(allowed: Optional[bool]):
    before = torch.backends.cudnn.allow_tf32
    if allowed is not None:
        torch.backends.cudnn.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = before


def make_inputs(case: Case, seed: int = 0) -> list[torch.Tensor]:
    """float32 CPU input, offset, mask, weight, bias."""
    gen = torch.Generator().manual_seed(seed)
    n, c, h, w = case.shape
    taps = KERNEL * KERNEL
    x = torch.randn(n, c, h, w, generator=gen)
    offset = torch.randn(n, 2 * taps, h, w, generator=gen) * 2.0
    # keep every sample >= 0.1 px away from a pixel row/column: there the offset
    # gradient jumps, and float32 vs float64 may land on different sides
    offset = offset.floor() + 0.1 + 0.8 * (offset - offset.floor())
    mask = torch.sigmoid(torch.randn(n, taps, h, w, generator=gen))
    weight = torch.randn(case.out_channels, c, KERNEL, KERNEL, generator=gen) / (c * taps) ** 0.5
    bias = torch.randn(case.out_channels, generator=gen)
    return [x, offset, mask, weight, bias]


def mm_call(x, offset, mask, weight, bias, op):
    if op == "modulated":
        return mmops.modulated_deform_conv2d(x, offset, mask, weight, bias, 1, PADDING)
    return mmops.deform_conv2d(x, offset, weight, bias, 1, PADDING)


def tv_call(x, offset, mask, weight, bias, op):
    return tv_deform_conv2d(
        x, offset, weight, bias, padding=(PADDING, PADDING), mask=mask if op == "modulated" else None
    )


def leaves_of(tensors, op):
    """The tensors the op is differentiated with respect to."""
    return [t for i, t in enumerate(tensors) if op == "modulated" or i != 2]


def reference(tensors, grad_out, op):
    """torchvision in float64 on the same (rounded) values: output and gradients."""
    t64 = [t.detach().double().requires_grad_(True) for t in tensors]
    out = tv_call(*t64, op)
    grads = torch.autograd.grad(out, leaves_of(t64, op), grad_out.double())
    return out.detach(), grads


# The last float64 reference, by (case name, dtype, op): the configurations of a case share it.
_REF_CACHE: dict = {}


def bench_config(case, dtype_name, layout_name, op, run, timer, problems, ref_cache=_REF_CACHE) -> FwdBwdRow:
    """One configuration (checked, then timed)."""
    device = run.device
    dtype, tf32 = DTYPES[dtype_name]
    fmt = LAYOUTS[layout_name]
    if ref_cache and next(iter(ref_cache))[0] != case.name:
        ref_cache.clear()  # a new case: the last one's reference is not needed again
    row = FwdBwdRow((case.name, dtype_name, layout_name, op))
    label = f"{case.name}/{dtype_name}/{layout_name}/{op}"
    base = make_inputs(case)
    tensors = [t.to(device=device, dtype=dtype) for t in base]
    tensors[0] = tensors[0].contiguous(memory_format=fmt)
    grad_out = torch.randn(
        (case.shape[0], case.out_channels) + case.shape[2:], generator=torch.Generator().manual_seed(1)
    ).to(device=device, dtype=dtype)
    req = [t.detach().clone(memory_format=torch.preserve_format).requires_grad_(True) for t in tensors]
    with cudnn_tf32(tf32):
        # --- correctness ---------------------------------------------------
        try:
            out = mm_call(*req, op)
            grads = torch.autograd.grad(out, leaves_of(req, op), grad_out)
        except Exception as exc:  # report, and go on with the other rows
            row.check = "ERROR"
            problems.append(f"{label}: mmops raised {type(exc).__name__}: {exc}")
            return row
        if tv_deform_conv2d is not None:
            key = (case.name, dtype, op)
            if key not in ref_cache:
                ref_cache.clear()  # one float64 reference in memory at a time
                ref_cache[key] = reference(tensors, grad_out, op)
            ref_out, ref_grads = ref_cache[key]
            worst = max([rel_err(out, ref_out)] + [rel_err(g, r) for g, r in zip(grads, ref_grads)])
            row.check = f"{worst:.0e}"
            if worst > TOLERANCE[dtype_name]:
                row.check += " !"
                problems.append(
                    f"{label}: mmops vs float64 torchvision: rel err {worst:.2e} (tol {TOLERANCE[dtype_name]:.0e})"
                )
        else:
            row.check = "n/a"
        del out, grads

        # --- timing --------------------------------------------------------
        with torch.no_grad():
            row.extra["conv2d"] = timer(lambda: F.conv2d(tensors[0], tensors[3], tensors[4], 1, PADDING))
            row.mm_fwd = timer(lambda: mm_call(*tensors, op))
        row.mm_fb = timer(lambda: torch.autograd.grad(mm_call(*req, op), leaves_of(req, op), grad_out))
        if tv_deform_conv2d is not None:
            try:
                with torch.no_grad():
                    tv_call(*tensors, op)  # torchvision lacks some dtype kernels
                    row.base_fwd = timer(lambda: tv_call(*tensors, op))
                row.base_fb = timer(lambda: torch.autograd.grad(tv_call(*req, op), leaves_of(req, op), grad_out))
            except (RuntimeError, NotImplementedError):
                pass
    return row


def case_line(c: Case) -> str:
    n, ch, h, w = c.shape
    return (
        f"  {c.name:14s} input {n}x{ch}x{h}x{w}, weight {c.out_channels}x{ch}x{KERNEL}x{KERNEL}, "
        f"stride 1, padding {PADDING}, bias, deform_groups 1"
    )


def main() -> int:
    return benchmark_main(
        __doc__,
        "deform_conv2d benchmark",
        iters=ITERS,
        warmup=WARMUP,
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, ["fp32/tf32", "fp32/ieee", "bf16"], ["fp32/ieee"]),
            LAYOUT_OPTION,
            ListOption("ops", OPS, OPS, ["modulated"]),
        ],
        bench=bench_config,
        labels=("case", "dtype", "layout", "op"),
        baseline="torchvision",
        check="rel err",
        before=[("conv2d fwd ms", lambda r: fmt_ms(r.extra.get("conv2d")))],
        notes="; rel err = worst max|mmops - ref| / max|ref| over output and gradients, ref = torchvision float64",
        case_line=case_line,
        loop=("ops", "dtypes", "layouts"),
    )


if __name__ == "__main__":
    sys.exit(main())
