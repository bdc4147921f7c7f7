"""Benchmark mmops' focal losses against plain-PyTorch composites, in the same process.

  sigmoid_focal_loss: mmops vs the plain-PyTorch composite torchvision.ops.sigmoid_focal_loss
                      on a one-hot target (made once, outside the timing), reduction "mean"
                      (sum / N, mmcv's convention)
  softmax_focal_loss: mmops vs a plain-PyTorch composite (log_softmax, gather, focal term), "mean"

CUDA: 65536 x 80 logits; CPU: 8192 x 80. Every configuration is checked first
against a float64 reference (loss and gradient to 1e-5 relative for float32,
2e-2 for bfloat16), so the benchmark never times wrong code. Then forward and
forward+backward (torch.autograd.grad) are timed.

  CUDA: CUDA events around each iteration after warm-up, median.
  CPU:  time.perf_counter, median, float32 only.

ratio = baseline ms / mmops ms (> 1: mmops faster).

Usage:
  PYTHONPATH=python python benchmarks/bench_focal_loss.py [--device cpu|cuda] [--iters N]
      [--warmup N] [--ops sigmoid_focal_loss,softmax_focal_loss] [--dtypes fp32,bf16] [--quick]

Exit code 1 when a correctness check fails or mmops raises, else 0.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from bench_common import (
    FwdBwdRow,
    Timer,
    add_run_arguments,
    parse_list,
    print_fwd_bwd_table,
    print_header,
    rel_err,
    report_problems,
    resolve_run,
    select_cases,
)

import mmops

try:
    import torchvision
    from torchvision.ops import sigmoid_focal_loss as tv_sigmoid_focal_loss
except ImportError:  # pragma: no cover
    torchvision = None
    tv_sigmoid_focal_loss = None

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
GAMMA, ALPHA = 2.0, 0.25


@dataclass(frozen=True)
class Case:
    name: str  # the op
    kind: str  # sigmoid / softmax


CASES = [Case("sigmoid_focal_loss", "sigmoid"), Case("softmax_focal_loss", "softmax")]
CUDA_SHAPE, CPU_SHAPE = (65536, 80), (8192, 80)


def sigmoid_composite(x, onehot):
    """The baseline: torchvision's plain-PyTorch sigmoid focal loss, mmcv's mean (sum / N)."""
    return tv_sigmoid_focal_loss(x, onehot, ALPHA, GAMMA, "sum") / x.shape[0]


def sigmoid_reference(x, onehot):
    x = x.double()
    p = torch.sigmoid(x)
    loss = onehot * (-ALPHA * (1 - p) ** GAMMA * F.logsigmoid(x)) + (1 - onehot) * (
        -(1 - ALPHA) * p**GAMMA * F.logsigmoid(-x)
    )
    return loss.sum() / x.shape[0]


def softmax_composite(x, t):
    """Plain-PyTorch softmax focal loss (mmcv semantics), mean = sum / N."""
    logp = torch.log_softmax(x, dim=1).gather(1, t[:, None])[:, 0]
    return (-ALPHA * (1 - logp.exp()) ** GAMMA * logp).sum() / x.shape[0]


def bench_focal(kind, rows, classes, dtype_name, device, timer, problems):
    dtype = DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(2)
    x = (torch.randn(rows, classes, generator=gen) * 3).to(device=device, dtype=dtype)
    hi = classes + 1 if kind == "sigmoid" else classes
    t = torch.randint(0, hi, (rows,), generator=gen).to(device)
    onehot = F.one_hot(t, classes + 1)[:, :classes].to(dtype)
    x_req = x.detach().clone().requires_grad_(True)
    op = torch.ops.mmops.sigmoid_focal_loss if kind == "sigmoid" else torch.ops.mmops.softmax_focal_loss
    row = FwdBwdRow(f"{kind}_focal_loss", f"{rows}x{classes}, mean", dtype_name, "-")

    def mm(v):
        return op(v, t, GAMMA, ALPHA, None, "mean")

    def base(v):
        if kind == "sigmoid":
            return sigmoid_composite(v, onehot) if tv_sigmoid_focal_loss is not None else None
        return softmax_composite(v, t)

    try:
        out = mm(x_req)
        (grad,) = torch.autograd.grad(out, x_req)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{kind}_focal_loss/{dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    xr = x.detach().double().requires_grad_(True)
    ref = sigmoid_reference(xr, onehot.double()) if kind == "sigmoid" else softmax_composite(xr, t)
    (ref_grad,) = torch.autograd.grad(ref, xr)
    fwd_err, bwd_err = rel_err(out, ref), rel_err(grad, ref_grad)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    row.check = f"{fwd_err:.0e}/{bwd_err:.0e}"
    if fwd_err > tol or bwd_err > tol:
        row.check += " !"
        problems.append(
            f"{kind}_focal_loss/{dtype_name}: vs float64 reference: loss rel err {fwd_err:.2e}, "
            f"grad rel err {bwd_err:.2e} (tol {tol:.0e})"
        )
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x_req), x_req))
    if base(x) is not None:
        with torch.no_grad():
            row.base_fwd = timer(lambda: base(x))
        row.base_fb = timer(lambda: torch.autograd.grad(base(x_req), x_req))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser, iters=(100, 10), warmup=(10, 2))
    parser.add_argument("--ops", dest="cases", help="the same as --cases: sigmoid_focal_loss,softmax_focal_loss")
    parser.add_argument("--dtypes", help="comma-separated of fp32,fp16,bf16 (default: fp32,bf16 on cuda, fp32 on cpu)")
    args = parser.parse_args()
    run = resolve_run(parser, args, iters=(100, 10), warmup=(10, 2))
    cases = select_cases(parser, args.cases, CASES)
    try:
        dtypes = parse_list(args.dtypes, DTYPES) or (["fp32", "bf16"] if run.cuda else ["fp32"])
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    timer = Timer(run.device, run.iters, run.warmup)
    print_header(
        "focal loss benchmark", run, getattr(mmops, "library_path", "?"), getattr(torchvision, "__version__", None)
    )

    rows, problems = [], []
    for case in cases:
        for d in dtypes:
            rows.append(
                bench_focal(case.kind, *(CUDA_SHAPE if run.cuda else CPU_SHAPE), d, run.device, timer, problems)
            )
    print_fwd_bwd_table(rows)
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
