"""Benchmark mmops.prroi_pool against a plain-PyTorch composite, in the same process.

The composite computes the same exact integral in closed form: per roi the weight of
every map row in every bin row (wy [K, PH, H]) and of every column (wx [K, PW, W]) from
the tent's antiderivative, then out[k] = wy[k] @ x[b_k] @ wx[k]^T / area per image with
two einsums; autograd gives its input and roi gradients. (mmcv's own backward does not
return the roi gradient, so there is no mmcv column.)

IoU-Net style heads: a ResNet C4 map at 1/16 (CUDA: 2x1024x50x68, 512 rois) and an FPN
P2 level at 1/4 (2x256x200x272, 1000 rois), 7x7 bins; rois "uniform" (sides up to half
the image) or "proposals" (log-uniform sides of 16-256 px, as an RPN's). CPU: 1x64x50x68
at 1/16, 128 rois. Each configuration is first checked against the composite in float32
(outputs, input and roi gradients), then forward and forward+backward (gradients of the
input and the rois) are timed.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
ROIS = ("uniform", "proposals")


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple  # N, C, H, W of the feature map
    spatial_scale: float
    num_rois: int
    output_size: int


CUDA_CASES = [Case("c4", (2, 1024, 50, 68), 1 / 16, 512, 7), Case("p2", (2, 256, 200, 272), 1 / 4, 1000, 7)]
CPU_CASES = [Case("c4", (1, 64, 50, 68), 1 / 16, 128, 7)]


def make_rois(shape, scale, num_rois, kind, gen):
    n, _, h, w = shape
    img_h, img_w = h / scale, w / scale
    b = torch.randint(0, n, (num_rois,), generator=gen).double()
    if kind == "uniform":
        x1, y1 = torch.rand(num_rois, generator=gen) * img_w, torch.rand(num_rois, generator=gen) * img_h
        bw = torch.rand(num_rois, generator=gen) * img_w / 2
        bh = torch.rand(num_rois, generator=gen) * img_h / 2
    else:
        side = torch.exp(torch.rand(num_rois, 2, generator=gen) * math.log(16) + math.log(16))
        bw, bh = side[:, 0], side[:, 1]
        x1 = torch.rand(num_rois, generator=gen) * (img_w - bw).clamp(min=1)
        y1 = torch.rand(num_rois, generator=gen) * (img_h - bh).clamp(min=1)
    x2, y2 = torch.clamp(x1 + bw, max=img_w), torch.clamp(y1 + bh, max=img_h)
    return torch.stack([b, x1.double(), y1.double(), x2.double(), y2.double()], 1).float()


def _tent_antiderivative(u):
    return torch.where(
        u <= -1,
        torch.zeros_like(u),
        torch.where(u <= 0, 0.5 * (u + 1) ** 2, torch.where(u < 1, 1 - 0.5 * (1 - u) ** 2, torch.ones_like(u))),
    )


def _axis_weights(start, length, bins, size):
    """[K, bins, size]: the integral of each pixel's tent over each bin of [start, start + length]."""
    step = length.clamp(min=0) / bins
    lo = start[:, None] + step[:, None] * torch.arange(bins, device=start.device, dtype=start.dtype)
    pixels = torch.arange(size, device=start.device, dtype=start.dtype)
    return _tent_antiderivative((lo + step[:, None])[..., None] - pixels) - _tent_antiderivative(
        lo[..., None] - pixels
    ), step


def composite_prroi_pool(x, rois, output_size, spatial_scale):
    n_img, c, h, w = x.shape
    ph, pw = output_size
    r = rois[:, 1:].to(x.dtype) * spatial_scale
    wy, bin_h = _axis_weights(r[:, 1], r[:, 3] - r[:, 1], ph, h)
    wx, bin_w = _axis_weights(r[:, 0], r[:, 2] - r[:, 0], pw, w)
    area = bin_h * bin_w
    pools = area > 0  # an empty bin pools 0 and passes no gradient (no 0 / 0)
    area = torch.where(pools, area, torch.ones_like(area))
    image = rois[:, 0].long()
    parts = []
    for n in range(n_img):
        idx = (image == n).nonzero().squeeze(1)
        rows = torch.einsum("kph,chw->kcpw", wy[idx], x[n])
        scale = pools[idx].to(x.dtype) / area[idx]
        parts.append((idx, torch.einsum("kcpw,kqw->kcpq", rows, wx[idx]) * scale[:, None, None, None]))
    out = x.new_zeros(rois.shape[0], c, ph, pw)
    for idx, part in parts:
        out = out.index_copy(0, idx, part)
    return out


def bench_prroi_pool(case, rois_kind, dtype_name, run, timer, problems):
    device = run.device
    shape, scale, num_rois, size = case.shape, case.spatial_scale, case.num_rois, case.output_size
    dtype = DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    r = make_rois(shape, scale, num_rois, rois_kind, gen).to(device=device, dtype=dtype)
    go = torch.randn(num_rois, shape[1], size, size, generator=gen).to(device=device, dtype=dtype)
    x_req, r_req = x.detach().clone().requires_grad_(True), r.detach().clone().requires_grad_(True)
    label = f"{'x'.join(map(str, shape))}, {num_rois} {rois_kind} rois, {size}x{size}, 1/{round(1 / scale)}"
    row = FwdBwdRow(("prroi_pool", label, dtype_name))
    args = ([size, size], scale)

    def fwd_bwd(fn):
        return lambda: torch.autograd.grad(fn(x_req, r_req, *args), (x_req, r_req), go)

    try:
        out = torch.ops.mmops.prroi_pool(x_req, r_req, *args)
        gx, gr = torch.autograd.grad(out, (x_req, r_req), go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"prroi_pool/{rois_kind}/{dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    # reference: the composite in float64 on the same rounded values
    xr = x.detach().double().requires_grad_(True)
    rr = r.detach().double().requires_grad_(True)
    ref = composite_prroi_pool(xr, rr, (size, size), scale)
    ref_gx, ref_gr = torch.autograd.grad(ref, (xr, rr), go.double())
    errs = rel_err(out, ref), rel_err(gx, ref_gx), rel_err(gr[:, 1:], ref_gr[:, 1:])
    # float32: bin edges are rounded to float32 (~1e-5 px on these maps), and a bin a fraction
    # of a pixel wide turns that into ~1e-4 of its mean
    tol = (1e-4, 1e-4, 1e-3) if dtype == torch.float32 else (2e-2, 2e-2, 1e-1)
    row.check = f"{errs[0]:.0e}/{errs[1]:.0e}/{errs[2]:.0e}"
    if any(e > t for e, t in zip(errs, tol)):
        row.check += " !"
        problems.append(
            f"prroi_pool/{rois_kind}/{dtype_name}: vs the composite in fp64: rel err output {errs[0]:.1e}, "
            f"input grad {errs[1]:.1e}, roi grad {errs[2]:.1e} (tol {tol})"
        )
    del out, gx, gr, ref, ref_gx, ref_gr
    with torch.no_grad():
        row.mm_fwd = timer(lambda: torch.ops.mmops.prroi_pool(x, r, *args))
        row.base_fwd = timer(lambda: composite_prroi_pool(x, r, *args))
    row.mm_fb = timer(fwd_bwd(torch.ops.mmops.prroi_pool))
    row.base_fb = timer(fwd_bwd(composite_prroi_pool))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "prroi_pool benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[ListOption("rois", ROIS, ROIS, ROIS), ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"])],
        bench=bench_prroi_pool,
        labels=("op", "shape", "dtype"),
        baseline="composite",
        check="rel err out/grad x/grad rois",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
