"""Benchmark mmops.psa_mask against a plain-PyTorch composite (the output's
nonzero places and their input entries as two index vectors, computed once
outside the timing as a model would keep them; then a zero output and one
indexed copy, whose backward is an index gather), in the same process.

PSANet shapes: the whole-map mask (mask 2H-1 x 2W-1, every pixel pair gets an
entry: the ADE20K / Cityscapes heads at 1/8 resolution) and a local 9x9 mask
(mostly zeros: the case where the output write dominates); "collect" and
"distribute". CUDA: 4 x 64x64 (whole map, 67 M output values) and 4 x 64x64 with
a 9x9 mask, 2 x 97x97 whole map; CPU: 1 x 24x24. Every configuration is first
checked against the composite, and the CPU sizes also against the float64 loop
reference of the tests (exact), then
forward and forward+backward (torch.autograd.grad with a fixed output gradient)
are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from psa_mask_reference import psa_mask_ref

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TYPES = ("collect", "distribute")


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    height: int
    width: int
    mask: int  # 0: the whole-map mask 2H-1 x 2W-1


CUDA_CASES = [Case("whole_64", 4, 64, 64, 0), Case("local9_64", 4, 64, 64, 9), Case("whole_97", 2, 97, 97, 0)]
CPU_CASES = [Case("whole_24", 1, 24, 24, 0), Case("local9_24", 1, 24, 24, 9)]
# The Python loop reference visits every (pixel, mask entry) pair: 24x24 maps take seconds, the
# CUDA cases' 64x64 maps with whole-map masks hours. Those are checked against the composite only.
LOOP_REFERENCE_PLANE = 24 * 24


def mask_size(case):
    return [2 * case.height - 1, 2 * case.width - 1] if case.mask == 0 else [case.mask, case.mask]


def composite_indices(case, psa_type, device):
    """(target, source): flat indices into one image's output [H*W*H*W] and input [mh*mw*H*W]."""
    h_, w_ = case.height, case.width
    mh, mw = mask_size(case)
    h = torch.arange(h_, device=device).view(h_, 1, 1, 1)  # built where they are used: 17 M entries
    w = torch.arange(w_, device=device).view(1, w_, 1, 1)
    i = torch.arange(mh, device=device).view(1, 1, mh, 1)
    j = torch.arange(mw, device=device).view(1, 1, 1, mw)
    y, x = h + i - (mh - 1) // 2, w + j - (mw - 1) // 2
    inside = (y >= 0) & (y < h_) & (x >= 0) & (x < w_)
    plane = h_ * w_
    pixel = (h * w_ + w).expand_as(inside)
    target_pixel = (y * w_ + x).expand_as(inside)
    channel = (i * mw + j).expand_as(inside)
    target = target_pixel * plane + pixel if psa_type == "collect" else pixel * plane + target_pixel
    source = channel * plane + pixel
    return target[inside], source[inside]


def composite(x, target, source, plane):
    n = x.shape[0]
    out = x.new_zeros(n, plane * plane)
    out[:, target] = x.reshape(n, -1)[:, source]
    return out.view(n, plane, *x.shape[2:])


def bench_psa(case, dtype_name, psa_type, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator(device=device).manual_seed(0)  # drawn on the device: the inputs reach 1 GB
    ms = mask_size(case)
    plane = case.height * case.width
    x = torch.randn(case.batch, ms[0] * ms[1], case.height, case.width, generator=gen, device=device)
    x = x.to(dtype).requires_grad_(True)
    go = torch.randn(case.batch, plane, case.height, case.width, generator=gen, device=device).to(dtype)
    target, source = composite_indices(case, psa_type, device)
    row = FwdBwdRow(("psa_mask", f"{case.batch}x{case.height}x{case.width} mask {ms[0]}x{ms[1]}", dtype_name, psa_type))
    name = f"psa_mask/{case.name}/{dtype_name}/{psa_type}"

    def mm(t):
        return torch.ops.mmops.psa_mask(t, psa_type, ms)

    def base(t):
        return composite(t, target, source, plane)

    try:
        out = mm(x)
        (grad,) = torch.autograd.grad(out, x, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    (base_grad,) = torch.autograd.grad(base(x), x, go)
    errs = [rel_err(base(x.detach()).cpu(), out.cpu()), rel_err(grad.cpu(), base_grad.cpu())]
    if plane <= LOOP_REFERENCE_PLANE:  # the loop reference on the first image (images do not mix)
        errs.insert(0, rel_err(out[:1].cpu(), psa_mask_ref(x.detach()[:1].cpu(), psa_type, ms)))
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if any(e != 0 for e in errs):
        row.check += " !"
        problems.append(f"{name}: rel err [out/]composite/grad {row.check} (all must be exact)")
    del out, grad, base_grad
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x))
        row.base_fwd = timer(lambda: base(x))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x), x, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(x), x, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "psa_mask benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("types", TYPES, TYPES, TYPES),
        ],
        bench=bench_psa,
        labels=("op", "shape", "dtype", "type"),
        baseline="indexed copy",
        check="rel err [loop ref/]composite/grad",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
