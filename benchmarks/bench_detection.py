"""Benchmark mmops' detection ops against their baselines, in the same process.

  roi_pool:           mmops.roi_pool vs torchvision.ops.roi_pool (box-head case)
  sigmoid_focal_loss: mmops vs the plain-PyTorch composite torchvision.ops.sigmoid_focal_loss
                      on a one-hot target (made once, outside the timing), reduction "mean"
                      (sum / N, mmcv's convention)
  softmax_focal_loss: mmops vs a plain-PyTorch composite (log_softmax, gather, focal term), "mean"

Every configuration is checked first, so the benchmark never times wrong code:
roi_pool against torchvision in float32 on the same (already rounded) values
(the output must match exactly: a max selects a value; the gradient to 1e-2
relative for 16-bit dtypes), the focal losses against a float64 reference.
Then forward and forward+backward (torch.autograd.grad with a fixed output
gradient) are timed.

  CUDA: CUDA events around each iteration after warm-up, median.
  CPU:  time.perf_counter, median, smaller shapes, float32 only.

ratio = baseline ms / mmops ms (> 1: mmops faster).

Usage:
  PYTHONPATH=python python benchmarks/bench_detection.py [--device cpu|cuda] [--iters N]
      [--warmup N] [--ops roi_pool,sigmoid_focal_loss,softmax_focal_loss] [--dtypes fp32,bf16] [--quick]

Exit code 1 when a correctness check fails or mmops raises, else 0.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

import mmops
from bench_common import Timer, fmt_ms, fmt_ratio, print_columns, report_problems

try:
    import torchvision
    from torchvision.ops import roi_pool as tv_roi_pool
    from torchvision.ops import sigmoid_focal_loss as tv_sigmoid_focal_loss
except ImportError:  # pragma: no cover
    torchvision = None
    tv_roi_pool = None
    tv_sigmoid_focal_loss = None

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
GAMMA, ALPHA = 2.0, 0.25


@dataclass
class Row:
    op: str
    shape: str
    dtype: str
    layout: str
    base_fwd: Optional[float] = None
    mm_fwd: Optional[float] = None
    base_fb: Optional[float] = None
    mm_fb: Optional[float] = None
    check: str = ""


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    diff = (out.double() - ref.double()).abs().max().item() if out.numel() else 0.0
    return diff / max(ref.double().abs().max().item() if ref.numel() else 0.0, 1e-12)


# --------------------------------------------------------------------------- roi_pool

def roi_pool_inputs(shape, scale, num_rois, seed=0):
    """float32 CPU features and rois: random boxes in the (H / scale) x (W / scale)
    image, sides up to half the image side (as benchmarks/bench_roi_align.py)."""
    gen = torch.Generator().manual_seed(seed)
    n, _, h, w = shape
    img_h, img_w = h / scale, w / scale
    x = torch.randn(shape, generator=gen)
    b = torch.randint(0, n, (num_rois,), generator=gen).float()
    x1 = torch.rand(num_rois, generator=gen) * img_w
    y1 = torch.rand(num_rois, generator=gen) * img_h
    x2 = torch.clamp(x1 + torch.rand(num_rois, generator=gen) * img_w / 2, max=img_w)
    y2 = torch.clamp(y1 + torch.rand(num_rois, generator=gen) * img_h / 2, max=img_h)
    return x, torch.stack([b, x1, y1, x2, y2], 1)


def bench_roi_pool(shape, scale, num_rois, out_size, dtype_name, layout, device, timer, problems):
    dtype = DTYPES[dtype_name]
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    feats, rois = roi_pool_inputs(shape, scale, num_rois)
    x = feats.to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    r = rois.to(device=device, dtype=dtype)
    go = torch.randn(num_rois, shape[1], out_size, out_size,
                     generator=torch.Generator().manual_seed(1)).to(device=device, dtype=dtype)
    x_req = x.detach().clone(memory_format=fmt).requires_grad_(True)
    row = Row("roi_pool", f"{'x'.join(map(str, shape))}, {num_rois} rois, {out_size}x{out_size}, 1/{round(1 / scale)}",
              dtype_name, layout)
    args = ([out_size, out_size], scale)

    def mm():
        return torch.ops.mmops.roi_pool(x, r, *args)

    def mm_fb():
        return torch.autograd.grad(torch.ops.mmops.roi_pool(x_req, r, *args), x_req, go)

    try:
        out = torch.ops.mmops.roi_pool(x_req, r, *args)
        (grad,) = torch.autograd.grad(out, x_req, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"roi_pool/{dtype_name}/{layout}: mmops raised {type(exc).__name__}: {exc}")
        return row
    if tv_roi_pool is not None:
        # reference: torchvision in float32 on the same rounded values
        xr = x.detach().float().contiguous().requires_grad_(True)
        ref = tv_roi_pool(xr, r.float(), (out_size, out_size), scale)
        (ref_grad,) = torch.autograd.grad(ref, xr, go.float())
        fwd_err, bwd_err = rel_err(out, ref), rel_err(grad, ref_grad)
        bwd_tol = 1e-5 if dtype == torch.float32 else 2e-2
        row.check = f"{fwd_err:.0e}/{bwd_err:.0e}"
        if fwd_err > 0 or bwd_err > bwd_tol:
            row.check += " !"
            problems.append(f"roi_pool/{dtype_name}/{layout}: vs torchvision fp32: output rel err {fwd_err:.2e} "
                            f"(must be 0), input grad rel err {bwd_err:.2e} (tol {bwd_tol:.0e})")
    del out, grad
    with torch.no_grad():
        row.mm_fwd = timer(mm)
    row.mm_fb = timer(mm_fb)
    if tv_roi_pool is not None:
        try:
            with torch.no_grad():
                tv_roi_pool(x, r, (out_size, out_size), scale)
                row.base_fwd = timer(lambda: tv_roi_pool(x, r, (out_size, out_size), scale))
            row.base_fb = timer(lambda: torch.autograd.grad(tv_roi_pool(x_req, r, (out_size, out_size), scale),
                                                            x_req, go))
        except (RuntimeError, NotImplementedError):
            pass  # torchvision has no kernel for this dtype
    return row


# --------------------------------------------------------------------------- focal losses

def sigmoid_composite(x, onehot):
    """The baseline: torchvision's plain-PyTorch sigmoid focal loss, mmcv's mean (sum / N)."""
    return tv_sigmoid_focal_loss(x, onehot, ALPHA, GAMMA, "sum") / x.shape[0]


def sigmoid_reference(x, onehot):
    x = x.double()
    p = torch.sigmoid(x)
    loss = onehot * (-ALPHA * (1 - p) ** GAMMA * F.logsigmoid(x)) + \
        (1 - onehot) * (-(1 - ALPHA) * p ** GAMMA * F.logsigmoid(-x))
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
    row = Row(f"{kind}_focal_loss", f"{rows}x{classes}, mean", dtype_name, "-")

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
        problems.append(f"{kind}_focal_loss/{dtype_name}: vs float64 reference: loss rel err {fwd_err:.2e}, "
                        f"grad rel err {bwd_err:.2e} (tol {tol:.0e})")
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x_req), x_req))
    if base(x) is not None:
        with torch.no_grad():
            row.base_fwd = timer(lambda: base(x))
        row.base_fb = timer(lambda: torch.autograd.grad(base(x_req), x_req))
    return row


# --------------------------------------------------------------------------- table

def print_table(rows):
    header = ["op", "shape", "dtype", "layout", "baseline fwd ms", "mmops fwd ms", "ratio",
              "baseline fwd+bwd ms", "mmops fwd+bwd ms", "ratio", "rel err fwd/bwd"]
    cells = [[r.op, r.shape, r.dtype, r.layout, fmt_ms(r.base_fwd), fmt_ms(r.mm_fwd),
              fmt_ratio(r.base_fwd, r.mm_fwd), fmt_ms(r.base_fb), fmt_ms(r.mm_fb),
              fmt_ratio(r.base_fb, r.mm_fb), r.check] for r in rows]
    print_columns(header, cells, left=4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int)
    parser.add_argument("--warmup", type=int)
    parser.add_argument("--ops", default="roi_pool,sigmoid_focal_loss,softmax_focal_loss")
    parser.add_argument("--dtypes", help="comma-separated of fp32,fp16,bf16 (default: fp32,fp16,bf16 for "
                                         "roi_pool and fp32,bf16 for the losses on cuda; fp32 on cpu)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda requested but CUDA is not available")
    cuda = device.type == "cuda"
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    chosen = [d.strip() for d in args.dtypes.split(",")] if args.dtypes else None
    iters = args.iters or ((10 if cuda else 3) if args.quick else (100 if cuda else 10))
    warmup = args.warmup if args.warmup is not None else ((3 if cuda else 1) if args.quick else (10 if cuda else 2))
    timer = Timer(device, iters, warmup)
    where = torch.cuda.get_device_name(device) if cuda else f"cpu, {torch.get_num_threads()} threads"
    tv = torchvision.__version__ if torchvision is not None else "not installed"
    print(f"detection ops benchmark on {where}: torch {torch.__version__}, torchvision {tv}, "
          f"mmops from {getattr(mmops, 'library_path', '?')}")
    print(f"median of {iters} iterations after {warmup} warm-ups; ratio = baseline / mmops (>1: mmops faster)\n")

    if cuda:
        roi_case = ((2, 256, 200, 336), 1 / 4, 1024, 7)
        focal_case = (65536, 80)
        roi_dtypes, focal_dtypes = chosen or ["fp32", "fp16", "bf16"], chosen or ["fp32", "bf16"]
        layouts = ["contiguous", "channels_last"]
    else:
        roi_case = ((1, 64, 100, 168), 1 / 4, 256, 7)
        focal_case = (8192, 80)
        roi_dtypes = focal_dtypes = chosen or ["fp32"]
        layouts = ["contiguous", "channels_last"]
    rows, problems = [], []
    if "roi_pool" in ops:
        for d in roi_dtypes:
            for layout in layouts:
                rows.append(bench_roi_pool(*roi_case, d, layout, device, timer, problems))
                if cuda:
                    torch.cuda.empty_cache()
    for kind in ("sigmoid", "softmax"):
        if f"{kind}_focal_loss" in ops:
            for d in focal_dtypes:
                rows.append(bench_focal(kind, *focal_case, d, device, timer, problems))
    print_table(rows)
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
