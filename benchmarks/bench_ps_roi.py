"""Benchmark mmops.ps_roi_align / ps_roi_pool against torchvision.ops.ps_roi_align /
ps_roi_pool, in the same process.

Shapes: R-FCN heads (2 images, 7x7 bins, spatial scale 1/16 on a 64x64 map, i.e. 1024x1024
images): the classification head of 21 classes (7 * 7 * 21 = 1029 channels) and the box head of
10 (7 * 7 * 10 = 490 channels; class-agnostic boxes x 2.5 as in Light-Head), with 300 rois
(test-time proposals) and 2000 (training proposals). CPU: one 32x32 map of 7 * 7 * 4 = 196
channels, 64 rois. Rois: "proposals" (centres uniform over the image, sides log-uniform in
[32, 512] pixels: 2..32 cells; RPN proposals after NMS) or "large" (sides uniform in
[256, 1024] pixels: 16..64 cells, clamped to the image: long bins, many samples each).

Every configuration is first checked against torchvision in float32 on the same (already
rounded) values: the output and the input gradient, to 1e-5 relative for float32 (ps_roi_pool:
the output exactly, the gradient on rois that stay one cell inside the map, where torchvision's
backward is its forward's gradient) and 2e-2 for 16-bit dtypes. Then forward and forward+backward
(torch.autograd.grad with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err, torchvision_op

tv_ops = {"ps_roi_align": torchvision_op("ps_roi_align"), "ps_roi_pool": torchvision_op("ps_roi_pool")}

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
OPS = ("ps_roi_align", "ps_roi_pool")
ROIS = ("proposals", "large")


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple  # N, C, H, W of the feature map (C = C_out * 7 * 7)
    num_rois: int
    spatial_scale: float = 1 / 16
    output_size: int = 7


CUDA_CASES = [
    Case("cls_300", (2, 1029, 64, 64), 300),
    Case("cls_2000", (2, 1029, 64, 64), 2000),
    Case("box_300", (2, 490, 64, 64), 300),
    Case("box_2000", (2, 490, 64, 64), 2000),
]
CPU_CASES = [Case("small", (1, 196, 32, 32), 64)]


def make_rois(kind, batch, img_h, img_w, num_rois, inside=False, seed=0):
    """float32 [K, 5] rois in image pixels (see the module docstring). `inside`: boxes kept
    one cell (16 px) away from the right and bottom borders."""
    gen = torch.Generator().manual_seed(seed)
    b = torch.randint(0, batch, (num_rois,), generator=gen).float()
    if kind == "proposals":
        side = torch.exp(torch.empty(num_rois, 2).uniform_(3.4657, 6.2383, generator=gen))  # 32 .. 512
    else:
        side = torch.empty(num_rois, 2).uniform_(256, 1024, generator=gen)
    centre = torch.rand(num_rois, 2, generator=gen) * torch.tensor([img_w, img_h])
    limit = torch.tensor([img_w, img_h]) - (17.0 if inside else 0.0)
    lo = torch.clamp(centre - side / 2, min=0)
    lo = torch.minimum(lo, limit - 16)
    hi = torch.minimum(torch.maximum(centre + side / 2, lo + 16), limit)
    return torch.cat([b[:, None], lo, hi], 1)


def bench_ps_roi(case, op_name, roi_kind, dtype_name, run, timer, problems):
    device = run.device
    n, c, h, w = case.shape
    scale, out_size, k = case.spatial_scale, case.output_size, case.num_rois
    dtype = DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(case.shape, generator=gen).to(device=device, dtype=dtype)
    rois = make_rois(roi_kind, n, h / scale, w / scale, k).to(device=device, dtype=dtype)
    c_out = c // (out_size * out_size)
    go = torch.randn(k, c_out, out_size, out_size, generator=gen).to(device=device, dtype=dtype)
    x_req = x.detach().clone().requires_grad_(True)
    row = FwdBwdRow(
        (op_name, f"{n}x{c}x{h}x{w}, {k} {roi_kind} rois, {out_size}x{out_size}, 1/{round(1 / scale)}", dtype_name)
    )
    mm_op = getattr(torch.ops.mmops, op_name)
    args = ([out_size, out_size], scale) + ((-1,) if op_name == "ps_roi_align" else ())
    tv_args = ((out_size, out_size), scale) + ((-1,) if op_name == "ps_roi_align" else ())
    tv = tv_ops[op_name]

    def mm():
        return mm_op(x, rois, *args)

    def mm_fb():
        return torch.autograd.grad(mm_op(x_req, rois, *args), x_req, go)

    try:
        out = mm_op(x_req, rois, *args)
        (grad,) = torch.autograd.grad(out, x_req, go)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{op_name}/{roi_kind}/{dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    if tv is not None:
        # reference: torchvision in float32 on the same rounded values; for ps_roi_pool's
        # gradient, rois one cell inside the map (see the docstring)
        xr = x.detach().float().requires_grad_(True)
        ref = tv(xr, rois.float(), *tv_args)
        fwd_err = rel_err(out, ref)
        r_in = rois if op_name == "ps_roi_align" else make_rois(roi_kind, n, h / scale, w / scale, k, inside=True)
        r_in = r_in.to(device=device, dtype=dtype)
        xg = x.detach().clone().requires_grad_(True)
        (g_mm,) = torch.autograd.grad(mm_op(xg, r_in, *args), xg, go)
        (ref_grad,) = torch.autograd.grad(tv(xr, r_in.float(), *tv_args), xr, go.float())
        bwd_err = rel_err(g_mm, ref_grad)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        row.check = f"{fwd_err:.0e}/{bwd_err:.0e}"
        if fwd_err > tol or bwd_err > tol:
            row.check += " !"
            problems.append(
                f"{op_name}/{roi_kind}/{dtype_name}: vs torchvision fp32: output rel err {fwd_err:.2e}, "
                f"input grad rel err {bwd_err:.2e} (tol {tol:.0e})"
            )
    del out, grad
    with torch.no_grad():
        row.mm_fwd = timer(mm)
    row.mm_fb = timer(mm_fb)
    if tv is not None:
        try:
            with torch.no_grad():
                tv(x, rois, *tv_args)
                row.base_fwd = timer(lambda: tv(x, rois, *tv_args))
            row.base_fb = timer(lambda: torch.autograd.grad(tv(x_req, rois, *tv_args), x_req, go))
        except (RuntimeError, NotImplementedError):
            pass  # torchvision has no kernel for this dtype
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "ps_roi benchmark",
        iters=(100, 5),
        warmup=(10, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("ops", OPS, list(OPS), list(OPS)),
            ListOption("rois", ROIS, list(ROIS), ["proposals"]),
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
        ],
        labels=("op", "shape", "dtype"),
        bench=bench_ps_roi,
    )


if __name__ == "__main__":
    sys.exit(main())
