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
lower bound for the forward.

  CUDA: CUDA events around each iteration after warm-up, median.
  CPU:  time.perf_counter around each iteration after warm-up, median,
        torch.get_num_threads() threads; smaller shapes, fp32/ieee only.

ratio = torchvision ms / mmops ms (> 1 means mmops is faster).

Usage:
  PYTHONPATH=python python benchmarks/bench_deform_conv.py [--device cpu|cuda]
      [--iters N] [--warmup N] [--cases NAMES] [--dtypes fp32/tf32,fp32/ieee,bf16,fp16]
      [--layouts contiguous,channels_last] [--ops modulated,plain] [--quick]

The exit code is 1 when a correctness check fails or mmops raises, else 0
(timings are never asserted).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from bench_common import (
    Timer,
    add_run_arguments,
    fmt_ms,
    fmt_ratio,
    parse_list,
    print_columns,
    report_problems,
    resolve_run,
    select_cases,
)

import mmops

try:  # the baseline; without it only mmops is timed (and not checked)
    import torchvision
    from torchvision.ops import deform_conv2d as tv_deform_conv2d
except ImportError:  # pragma: no cover - depends on the machine
    torchvision = None
    tv_deform_conv2d = None


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
LAYOUTS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}
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


def rel_err(out, ref) -> float:
    diff = (out.double() - ref).abs().max().item()
    return diff / max(ref.abs().max().item(), 1e-12)


@dataclass
class Row:
    case: str
    dtype: str
    layout: str
    op: str
    conv_fwd: Optional[float] = None
    tv_fwd: Optional[float] = None
    mm_fwd: Optional[float] = None
    tv_fb: Optional[float] = None
    mm_fb: Optional[float] = None
    check: str = ""


def bench_config(case, dtype_name, layout_name, op, device, timer, problems, ref_cache) -> Row:
    dtype, tf32 = DTYPES[dtype_name]
    fmt = LAYOUTS[layout_name]
    row = Row(case.name, dtype_name, layout_name, op)
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
            row.conv_fwd = timer(lambda: F.conv2d(tensors[0], tensors[3], tensors[4], 1, PADDING))
            row.mm_fwd = timer(lambda: mm_call(*tensors, op))
        row.mm_fb = timer(lambda: torch.autograd.grad(mm_call(*req, op), leaves_of(req, op), grad_out))
        if tv_deform_conv2d is not None:
            try:
                with torch.no_grad():
                    tv_call(*tensors, op)  # torchvision lacks some dtype kernels
                    row.tv_fwd = timer(lambda: tv_call(*tensors, op))
                row.tv_fb = timer(lambda: torch.autograd.grad(tv_call(*req, op), leaves_of(req, op), grad_out))
            except (RuntimeError, NotImplementedError):
                pass
    return row


def print_table(rows: list[Row]) -> None:
    header = [
        "case",
        "dtype",
        "layout",
        "op",
        "conv2d fwd ms",
        "torchvision fwd ms",
        "mmops fwd ms",
        "ratio",
        "torchvision fwd+bwd ms",
        "mmops fwd+bwd ms",
        "ratio",
        "rel err",
    ]
    cells = [
        [
            r.case,
            r.dtype,
            r.layout,
            r.op,
            fmt_ms(r.conv_fwd),
            fmt_ms(r.tv_fwd),
            fmt_ms(r.mm_fwd),
            fmt_ratio(r.tv_fwd, r.mm_fwd),
            fmt_ms(r.tv_fb),
            fmt_ms(r.mm_fb),
            fmt_ratio(r.tv_fb, r.mm_fb),
            r.check,
        ]
        for r in rows
    ]
    print_columns(header, cells, left=4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser, iters=ITERS, warmup=WARMUP)
    # parse_list raises argparse.ArgumentTypeError: argparse reports a bad item itself
    parser.add_argument(
        "--dtypes",
        type=functools.partial(parse_list, choices=DTYPES),
        help="comma-separated of fp32/tf32,fp32/ieee,bf16,fp16 "
        "(default: fp32/tf32,fp32/ieee,bf16 on cuda, fp32/ieee on cpu)",
    )
    parser.add_argument(
        "--layouts",
        type=functools.partial(parse_list, choices=LAYOUTS),
        help="comma-separated of contiguous,channels_last (default: both)",
    )
    parser.add_argument(
        "--ops",
        type=functools.partial(parse_list, choices=OPS),
        help="comma-separated of modulated,plain (default: modulated on cpu, both on cuda)",
    )
    args = parser.parse_args()

    run = resolve_run(parser, args, iters=ITERS, warmup=WARMUP)
    device, cuda, iters, warmup = run.device, run.cuda, run.iters, run.warmup
    cases = select_cases(parser, args.cases, CUDA_CASES if cuda else CPU_CASES)
    dtypes = args.dtypes or (["fp32/tf32", "fp32/ieee", "bf16"] if cuda else ["fp32/ieee"])
    layouts = args.layouts or list(LAYOUTS)
    ops = args.ops or (list(OPS) if cuda else ["modulated"])

    where = torch.cuda.get_device_name(device) if cuda else f"cpu, {torch.get_num_threads()} threads"
    tv_version = torchvision.__version__ if torchvision is not None else "not installed"
    print(
        f"deform_conv2d benchmark on {where}: torch {torch.__version__}, torchvision {tv_version}, "
        f"mmops from {getattr(mmops, 'library_path', '?')}"
    )
    print(
        f"median of {iters} iterations after {warmup} warm-ups; ratio = torchvision / mmops (>1: mmops faster); "
        f"rel err = worst max|mmops - ref| / max|ref| over output and gradients, ref = torchvision float64"
    )
    for c in cases:
        n, ch, h, w = c.shape
        print(
            f"  {c.name:14s} input {n}x{ch}x{h}x{w}, weight {c.out_channels}x{ch}x{KERNEL}x{KERNEL}, "
            f"stride 1, padding {PADDING}, bias, deform_groups 1"
        )
    print()

    timer = Timer(device, iters, warmup)
    rows, problems, ref_cache = [], [], {}
    for case in cases:
        for op in ops:
            for dtype_name in dtypes:
                for layout_name in layouts:
                    rows.append(bench_config(case, dtype_name, layout_name, op, device, timer, problems, ref_cache))
                    if cuda:
                        torch.cuda.empty_cache()
        ref_cache.clear()
    print_table(rows)
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
