"""Benchmark mmops.roi_pool against torchvision.ops.roi_pool, in the same process.

The box-head case (CUDA: 2x256x200x336 features, 1024 random rois, 7x7 bins,
spatial scale 1/4; CPU: 1x64x100x168, 256 rois), NCHW and channels_last.
Every configuration is checked first, so the benchmark never times wrong code:
against torchvision in float32 on the same (already rounded) values (the
output must match exactly: a max selects a value; the gradient to 1e-5
relative for float32, 2e-2 for 16-bit dtypes). Then forward and
forward+backward (torch.autograd.grad with a fixed output gradient) are timed;
on the CPU smaller shapes, float32 only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import LAYOUT_OPTION, FwdBwdRow, ListOption, benchmark_main, rel_err, torchvision_op

tv_roi_pool = torchvision_op("roi_pool")

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple  # N, C, H, W of the feature map
    spatial_scale: float
    num_rois: int
    output_size: int


CUDA_CASES = [Case("box_head", (2, 256, 200, 336), 1 / 4, 1024, 7)]
CPU_CASES = [Case("box_head", (1, 64, 100, 168), 1 / 4, 256, 7)]


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


def bench_roi_pool(case, dtype_name, layout, run, timer, problems):
    device = run.device
    shape, scale, num_rois, out_size = case.shape, case.spatial_scale, case.num_rois, case.output_size
    dtype = DTYPES[dtype_name]
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    feats, rois = roi_pool_inputs(shape, scale, num_rois)
    x = feats.to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    r = rois.to(device=device, dtype=dtype)
    go = torch.randn(num_rois, shape[1], out_size, out_size, generator=torch.Generator().manual_seed(1)).to(
        device=device, dtype=dtype
    )
    x_req = x.detach().clone(memory_format=fmt).requires_grad_(True)
    row = FwdBwdRow(
        (
            "roi_pool",
            f"{'x'.join(map(str, shape))}, {num_rois} rois, {out_size}x{out_size}, 1/{round(1 / scale)}",
            dtype_name,
            layout,
        )
    )
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
            problems.append(
                f"roi_pool/{dtype_name}/{layout}: vs torchvision fp32: output rel err {fwd_err:.2e} "
                f"(must be 0), input grad rel err {bwd_err:.2e} (tol {bwd_tol:.0e})"
            )
    del out, grad
    with torch.no_grad():
        row.mm_fwd = timer(mm)
    row.mm_fb = timer(mm_fb)
    if tv_roi_pool is not None:
        try:
            with torch.no_grad():
                tv_roi_pool(x, r, (out_size, out_size), scale)
                row.base_fwd = timer(lambda: tv_roi_pool(x, r, (out_size, out_size), scale))
            row.base_fb = timer(
                lambda: torch.autograd.grad(tv_roi_pool(x_req, r, (out_size, out_size), scale), x_req, go)
            )
        except (RuntimeError, NotImplementedError):
            pass  # torchvision has no kernel for this dtype
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "roi_pool benchmark",
        iters=(100, 10),
        warmup=(10, 2),
        cases=(CUDA_CASES, CPU_CASES),
        options=[ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]), LAYOUT_OPTION],
        bench=bench_roi_pool,
    )


if __name__ == "__main__":
    sys.exit(main())
