"""Benchmark mmops.border_align against a plain-PyTorch composite in the same process:
the border points of every box walked as mmcv (pool_size + 1 per border, computed once
outside the timing, as a model computes its boxes once), F.grid_sample (bilinear,
border padding, align_corners=True: mmcv's clamp of points in [-1, size]) of the four
channel groups in one call, a mask zeroing points outside, and the maximum over the points
(torch.max: the backward goes to one point, through grid_sample's backward).

Shapes: BorderDet's border branches (cvpods BorderDet: BorderAlign(pool_size=10) on
ltrb features of 4 * 256 channels (classification) and 4 * 128 (box regression), batch 2
per GPU, 800 x 1333 images) on FPN P3 (100 x 168, stride 8) and P4 (50 x 84); CPU: one
25 x 42 map of 4 * 16 channels. Boxes: "detector" (a box around every pixel, sides
log-uniform in [1, 16] cells: FCOS / BorderDet predictions at P3) or "random" (corners
uniform over the map: long borders, no locality between neighbouring boxes).

Every configuration is first checked: the output against the float64 composite (a slice
of 8 channels) and, on the CPU case, the float64 loop reference of the tests; the input
gradient against the float64 backward of the same winning points; then forward and
forward+backward (torch.autograd.grad with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from border_align_reference import (
    border_align_ref,
    border_points,
    detector_boxes,
    random_boxes,
)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
BOXES = ("detector", "random")
# tolerance of the checks (relative to the largest value; the reference walks the same points
# in the op's precision, then samples in float64)
TOL = {"fp32": 1e-4, "fp16": 2e-2, "bf16": 6e-2}


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    channels: int  # C: the input has 4C
    height: int
    width: int
    pool_size: int = 10


CUDA_CASES = [
    Case("p3_cls", 2, 256, 100, 168),
    Case("p3_reg", 2, 128, 100, 168),
    Case("p4_cls", 2, 256, 50, 84),
]
CPU_CASES = [Case("small", 1, 16, 25, 42)]


class Composite:
    """border_align as grid_sample + mask + max, the points computed once (constructor)."""

    def __init__(self, boxes, height, width, pool_size, dtype):
        # the points walked as the op walks them: in the boxes' dtype, float32 for 16-bit boxes
        # (a walk that ends a rounding past the map's edge samples 0, as in mmcv)
        walk_dtype = torch.float32 if boxes.dtype in (torch.float16, torch.bfloat16) else boxes.dtype
        xs, ys = (p.double() for p in border_points(boxes.to(walk_dtype), pool_size))  # [N, 4, K, P + 1]
        n, _, k, points = xs.shape
        self.shape = (n, k, points)
        inside = (xs >= -1) & (xs <= width) & (ys >= -1) & (ys <= height)
        grid = torch.stack([xs * (2.0 / (width - 1)) - 1.0, ys * (2.0 / (height - 1)) - 1.0], dim=-1)
        self.grid = grid.reshape(n * 4, k, points, 2).to(dtype)
        self.inside = inside.reshape(n * 4, 1, k, points).to(dtype)

    def __call__(self, x):
        n, k, points = self.shape
        c = x.shape[1] // 4
        planes = x.reshape(n * 4, c, x.shape[2], x.shape[3])
        samples = torch.nn.functional.grid_sample(
            planes, self.grid, mode="bilinear", padding_mode="border", align_corners=True
        )
        pooled = (samples * self.inside).max(dim=-1).values  # [N * 4, C, K]
        return pooled.reshape(n, 4, c, k).permute(0, 2, 3, 1)


def channel_slice(t, channels, keep):
    """The first `keep` channels of each of the four groups of t [N, 4C, ...]."""
    n = t.shape[0]
    return t.reshape(n, 4, channels, *t.shape[2:])[:, :, :keep].reshape(n, 4 * keep, *t.shape[2:])


def bench_border_align(case, dtype_name, boxes_kind, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(0)
    n, c, h, w, pool = case.batch, case.channels, case.height, case.width, case.pool_size
    x = torch.randn(n, 4 * c, h, w, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
    if boxes_kind == "detector":
        boxes = detector_boxes(n, h, w, gen, max_side=16.0)
    else:
        boxes = random_boxes(n, h, w, gen)
    boxes = boxes.to(device=device, dtype=dtype)
    go = torch.randn(n, c, h * w, 4, generator=gen).to(device=device, dtype=dtype)
    row = FwdBwdRow(("border_align", f"{n}x{4 * c}x{h}x{w} pool {pool}", dtype_name, boxes_kind))
    name = f"border_align/{case.name}/{dtype_name}/{boxes_kind}"

    def mm(t):
        return torch.ops.mmops.border_align(t, boxes, pool)

    base = Composite(boxes, h, w, pool, dtype)

    try:
        out = mm(x)
        (grad,) = torch.autograd.grad(out, x, go)
        _, argmax = torch.ops.mmops._border_align_forward(x.detach(), boxes, pool)
    except Exception as exc:
        row.check = "ERROR"
        problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    # the float64 composite on (a channel slice of) the same rounded values
    keep = min(c, 8)
    xs = channel_slice(x.detach(), c, keep).double()
    exp = Composite(boxes, h, w, pool, torch.float64)(xs)
    errs = [rel_err(out[:, :keep], exp)]
    if not run.cuda:  # the loop reference (slow in Python: the CPU case only)
        errs.append(rel_err(out[:, :keep].cpu(), border_align_ref(xs.cpu(), boxes.double().cpu(), pool)))
    # the gradient against the float64 backward of the same winners (near-ties between
    # points may pick other winners in another precision, so not against the composite's)
    exp_grad = torch.ops.mmops._border_align_backward(go.double(), boxes.double(), argmax, pool, list(x.shape))
    errs.append(rel_err(grad, exp_grad))
    row.check = "/".join(f"{e:.0e}" for e in errs)
    if any(e > TOL[dtype_name] for e in errs):
        row.check += " !"
        problems.append(f"{name}: rel err {row.check} (tolerance {TOL[dtype_name]:.0e})")
    del out, grad, exp
    with torch.no_grad():
        row.mm_fwd = timer(lambda: mm(x))
        row.base_fwd = timer(lambda: base(x))
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(x), x, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(x), x, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "border_align benchmark",
        iters=(30, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("boxes", BOXES, BOXES, BOXES),
        ],
        bench=bench_border_align,
        labels=("op", "shape", "dtype", "boxes"),
        baseline="grid_sample composite",
        check="rel err out vs f64 composite[/loop ref]/grad vs f64",
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
