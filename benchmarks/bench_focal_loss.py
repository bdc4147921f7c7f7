"""Benchmark mmops' focal losses against plain-PyTorch composites, in the same process.

  sigmoid_focal_loss: mmops vs the plain-PyTorch composite torchvision.ops.sigmoid_focal_loss
                      on a one-hot target (made once, outside the timing), reduction "mean"
                      (sum / N, mmcv's convention)
  softmax_focal_loss: mmops vs a plain-PyTorch composite (log_softmax, gather, focal term), "mean"

CUDA: 65536 x 80 logits; CPU: 8192 x 80. Every configuration is checked first
against a float64 reference (loss and gradient to 1e-5 relative for float32,
2e-2 for bfloat16), so the benchmark never times wrong code. Then forward and
forward+backward (torch.autograd.grad) are timed; on the CPU float32 only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err, torchvision_op

tv_sigmoid_focal_loss = torchvision_op("sigmoid_focal_loss")

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


def bench_focal(case, dtype_name, run, timer, problems):
    kind, device = case.kind, run.device
    rows, classes = CUDA_SHAPE if run.cuda else CPU_SHAPE
    dtype = DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(2)
    x = (torch.randn(rows, classes, generator=gen) * 3).to(device=device, dtype=dtype)
    hi = classes + 1 if kind == "sigmoid" else classes
    t = torch.randint(0, hi, (rows,), generator=gen).to(device)
    onehot = F.one_hot(t, classes + 1)[:, :classes].to(dtype)
    x_req = x.detach().clone().requires_grad_(True)
    op = torch.ops.mmops.sigmoid_focal_loss if kind == "sigmoid" else torch.ops.mmops.softmax_focal_loss
    row = FwdBwdRow((f"{kind}_focal_loss", f"{rows}x{classes}, mean", dtype_name, "-"))

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


def add_ops_alias(parser) -> None:
    parser.add_argument("--ops", dest="cases", help="the same as --cases: sigmoid_focal_loss,softmax_focal_loss")


def main() -> int:
    return benchmark_main(
        __doc__,
        "focal loss benchmark",
        iters=(100, 10),
        warmup=(10, 2),
        cases=(CASES, CASES),
        options=[ListOption("dtypes", DTYPES, ["fp32", "bf16"], ["fp32"])],
        bench=bench_focal,
        baseline="composite",
        add_arguments=add_ops_alias,
    )


if __name__ == "__main__":
    sys.exit(main())
