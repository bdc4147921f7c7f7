"""Benchmark mmops.masked_conv2d against the plain-PyTorch composite, in the same process.

The composite computes the full convolution and multiplies it by the mask:
F.conv2d(x, weight, bias, padding=1) * (mask > 0) (cuDNN on CUDA), which is what
masked_conv2d saves work on. Cases are guided-anchoring heads (mmdet's GA-RetinaNet:
3x3 masked convolutions over 256-channel FPN maps, batch 1 as mmcv allows):
CUDA: 1x256x100x152 (P3) and 1x256x50x76 (P4) with 80 and 256 output channels;
CPU: 1x64x50x76 and 1x64x25x38 with 32 outputs. Masks: i.i.d. uniform, sparse
(5% of the positions, as guided anchoring's location threshold keeps) and dense
(50%). Every configuration is checked first against the composite in float32 on
the same rounded values (output and the gradients w.r.t. input, weight and bias;
1e-4 relative for float32, 3e-2 for 16-bit dtypes); then forward and
forward+backward (torch.autograd.grad with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DENSITIES = {"5%": 0.05, "50%": 0.5}


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple  # N, C, H, W of the feature map
    out_channels: int
    kernel: int = 3


CUDA_CASES = [
    Case("ga_p3_cls", (1, 256, 100, 152), 80),
    Case("ga_p3_256", (1, 256, 100, 152), 256),
    Case("ga_p4_cls", (1, 256, 50, 76), 80),
]
CPU_CASES = [Case("ga_p3_small", (1, 64, 50, 76), 32), Case("ga_p4_small", (1, 64, 25, 38), 32)]


def inputs(case, density, seed=0):
    """float32 CPU input, mask (uniform in [0, 1) minus 1 - density: density > 0), weight, bias."""
    gen = torch.Generator().manual_seed(seed)
    n, c, h, w = case.shape
    k = case.kernel
    x = torch.randn(case.shape, generator=gen)
    mask = torch.rand(n, h, w, generator=gen) - (1 - density)
    weight = torch.randn(case.out_channels, c, k, k, generator=gen) / (c * k * k) ** 0.5
    bias = torch.randn(case.out_channels, generator=gen)
    return x, mask, weight, bias


def composite(x, mask, weight, bias, padding):
    return F.conv2d(x, weight, bias, padding=padding) * (mask > 0).unsqueeze(1).to(x.dtype)


def check(row, name, mm_results, ref_results, dtype, problems):
    errs = [rel_err(a, b) for a, b in zip(mm_results, ref_results)]
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    row.check = f"{errs[0]:.0e}/{max(errs[1:]):.0e}"
    if max(errs) > tol:
        row.check += " !"
        problems.append(f"{name}: vs the float32 composite: rel errs (out, input, weight, bias) {errs} (tol {tol})")


def bench_masked_conv(case, dtype_name, density_name, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    pad = case.kernel // 2
    x0, mask0, w0, b0 = inputs(case, DENSITIES[density_name])
    x, mask, weight, bias = (t.to(device=device, dtype=dtype) for t in (x0, mask0, w0, b0))
    n, _, h, w = case.shape
    go = torch.randn(n, case.out_channels, h, w, generator=torch.Generator().manual_seed(1)).to(device, dtype)
    leaves = [t.detach().clone().requires_grad_(True) for t in (x, weight, bias)]
    name = f"masked_conv2d/{case.name}/{dtype_name}/{density_name}"
    row = FwdBwdRow(
        ("masked_conv2d", f"{'x'.join(map(str, case.shape))} -> {case.out_channels}", dtype_name, density_name)
    )
    args = ([pad, pad], [1, 1])

    def mm(xi, wi, bi):
        return torch.ops.mmops.masked_conv2d(xi, mask, wi, bi, *args)

    def base(xi, wi, bi):
        return composite(xi, mask, wi, bi, pad)

    try:
        out = mm(*leaves)
        mm_results = [out, *torch.autograd.grad(out, leaves, go)]
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    # reference: the composite in float32 on the same rounded values, without TF32 (cuDNN's
    # default for conv2d; mmops's GEMM follows torch.backends.cuda.matmul.allow_tf32, off)
    ref_leaves = [t.detach().float().requires_grad_(True) for t in (x, weight, bias)]
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        ref = composite(ref_leaves[0], mask.float(), ref_leaves[1], ref_leaves[2], pad)
        ref_grads = torch.autograd.grad(ref, ref_leaves, go.float())
    check(row, name, mm_results, [ref, *ref_grads], dtype, problems)
    del out, mm_results, ref
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x, weight, bias))
        row.base_fwd = timer(lambda: base(x, weight, bias))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(*leaves), leaves, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(*leaves), leaves, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "masked_conv2d benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("densities", DENSITIES, list(DENSITIES), list(DENSITIES)),
        ],
        bench=bench_masked_conv,
        labels=("op", "shape", "dtype", "mask"),
        baseline="conv2d*mask",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
