"""Benchmark mmops.roi_align against torchvision.ops.roi_align.

Both run in the same process on the same inputs. Every (case, dtype, layout,
pool mode) is first checked for correctness, so the benchmark never times
wrong code: mmops' output and input gradient against a float64 reference
written here with plain torch ops (the "rel err" column), and mmops' fp32
output against torchvision's. Then forward and forward+backward are timed
(backward: torch.autograd.grad with a fixed random output gradient).

On the CPU smaller shapes, float32 only.

The "multi_level" case is FPN RoI feature extraction (4 maps, strides 4 to 32):
mmops.multi_level_roi_align in one call against what mmdet's SingleRoIExtractor
and torchvision's MultiScaleRoIAlign do, a Python loop over the levels that
calls torchvision.ops.roi_align on each level's rois (level from mmdet's rule,
floor(log2(sqrt(w * h) / 56 + 1e-6)) clamped to the levels) and scatters the
results into the output by index. Its backward is w.r.t. every map, and its
float64 reference is the same per-level loop over the reference below.

ratio = torchvision ms / mmops ms (> 1 means mmops is faster). torchvision has
no max pooling RoIAlign, so pool mode "max" rows time mmops only ("n/a"), as
do dtypes torchvision has no kernel for, and every row when torchvision is not
installed.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Optional

import torch
from bench_common import (
    LAYOUT_OPTION,
    LAYOUTS,
    FwdBwdRow,
    ListOption,
    benchmark_main,
    fmt_ms,
    fmt_ratio,
    torchvision_op,
)
from roi_align_reference import axis_samples  # the tests' sample positions (plain torch, float64)

import mmops

tv_roi_align = torchvision_op("roi_align")  # the baseline; without it only mmops is timed


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple  # N, C, H, W of the feature map (multi-level: of the finest map)
    spatial_scale: float
    num_rois: int
    output_size: int
    sampling_ratio: int
    # Multi-level (FPN) cases: the maps' strides; map l is [N, C, ceil(H * s_0 / s_l),
    # ceil(W * s_0 / s_l)] and spatial_scale is 1 / strides[0].
    strides: tuple = ()


CUDA_CASES = [
    Case("box", (2, 256, 200, 336), 1 / 4, 1024, 7, 2),
    Case("mask", (2, 256, 200, 336), 1 / 4, 512, 14, 2),
    Case("adaptive", (2, 256, 100, 168), 1 / 8, 1024, 7, 0),
    Case("many_rois", (8, 256, 64, 64), 1 / 16, 8192, 7, 2),
    Case("multi_level", (2, 256, 200, 336), 1 / 4, 1000, 7, 2, strides=(4, 8, 16, 32)),
]
CPU_CASES = [
    Case("box", (1, 64, 100, 168), 1 / 4, 256, 7, 2),
    Case("adaptive", (1, 64, 50, 84), 1 / 8, 256, 7, 0),
    Case("multi_level", (1, 32, 200, 336), 1 / 4, 256, 7, 2, strides=(4, 8, 16, 32)),
]
# mmdet's SingleRoIExtractor default: level = floor(log2(sqrt(w * h) / 56 + 1e-6))
FINEST_SCALE = 56
# Box sides of the multi-level cases: log-uniform in [16, 600] px, so every level gets rois
MULTI_LEVEL_SIDES = (16.0, 600.0)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# Allowed max |mmops - float64 reference| relative to max |reference|, per
# dtype: (forward, input gradient). The reference sees the same rounded low
# precision inputs, so the gap is only compute precision and output rounding
# (fp32 sample coordinates alone cost ~2e-5 here; torchvision's fp32 kernels
# are off by as much).
TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.float16: (5e-3, 2e-2), torch.bfloat16: (2e-2, 1e-1)}


def make_inputs(case: Case, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 CPU features and rois (batch_idx, x1, y1, x2, y2): random boxes
    in the (H / scale) x (W / scale) image, sides up to half the image side."""
    gen = torch.Generator().manual_seed(seed)
    n, _, h, w = case.shape
    img_h, img_w = h / case.spatial_scale, w / case.spatial_scale
    k = case.num_rois
    features = torch.randn(case.shape, generator=gen)
    batch_idx = torch.randint(0, n, (k,), generator=gen).float()
    x1 = torch.rand(k, generator=gen) * img_w
    y1 = torch.rand(k, generator=gen) * img_h
    x2 = torch.clamp(x1 + torch.rand(k, generator=gen) * img_w / 2, max=img_w)
    y2 = torch.clamp(y1 + torch.rand(k, generator=gen) * img_h / 2, max=img_h)
    return features, torch.stack([batch_idx, x1, y1, x2, y2], dim=1)


def level_shapes(case: Case) -> list[tuple]:
    """[N, C, H_l, W_l] of each map of a multi-level case (sizes rounded up)."""
    n, c, h, w = case.shape
    return [(n, c, -(-h * case.strides[0] // s), -(-w * case.strides[0] // s)) for s in case.strides]


def make_multi_level_inputs(case: Case, seed: int = 0) -> tuple[list[torch.Tensor], torch.Tensor]:
    """float32 CPU maps and rois of a multi-level case: boxes in the (H / scale) x
    (W / scale) image with width and height log-uniform in MULTI_LEVEL_SIDES
    (clipped to the image)."""
    gen = torch.Generator().manual_seed(seed)
    n, _, h, w = case.shape
    img_h, img_w = h / case.spatial_scale, w / case.spatial_scale
    k = case.num_rois
    features = [torch.randn(shape, generator=gen) for shape in level_shapes(case)]
    batch_idx = torch.randint(0, n, (k,), generator=gen).float()
    lo, hi = math.log(MULTI_LEVEL_SIDES[0]), math.log(MULTI_LEVEL_SIDES[1])
    bw = torch.exp(lo + torch.rand(k, generator=gen) * (hi - lo))
    bh = torch.exp(lo + torch.rand(k, generator=gen) * (hi - lo))
    x1 = torch.rand(k, generator=gen) * (img_w - bw).clamp(min=0)
    y1 = torch.rand(k, generator=gen) * (img_h - bh).clamp(min=0)
    x2 = torch.clamp(x1 + bw, max=img_w)
    y2 = torch.clamp(y1 + bh, max=img_h)
    return features, torch.stack([batch_idx, x1, y1, x2, y2], dim=1)


def map_roi_levels(rois: torch.Tensor, num_levels: int, finest_scale: int = FINEST_SCALE) -> torch.Tensor:
    """mmdet's SingleRoIExtractor.map_roi_levels (int64 [K]). 16-bit rois are
    mapped in float32 (as mmops does): w * h overflows float16."""
    r = rois if rois.dtype == torch.float64 else rois.float()
    scale = torch.sqrt((r[:, 3] - r[:, 1]) * (r[:, 4] - r[:, 2]))
    levels = torch.floor(torch.log2(scale / finest_scale + 1e-6))
    return levels.clamp(min=0, max=num_levels - 1).long()


def _reference_chunks(x_hwc, hw, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned):
    """Yields (roi indices, pooled [R, C, oh, ow]) over chunks of rois that share
    a sampling grid. x_hwc is the float64 input as [N, H*W, C]."""
    (h, w), (oh, ow) = hw, output_size
    c = x_hwc.shape[2]
    r = rois.to(torch.float64)
    off = 0.5 if aligned else 0.0
    x1, y1 = r[:, 1] * spatial_scale - off, r[:, 2] * spatial_scale - off
    roi_w, roi_h = r[:, 3] * spatial_scale - off - x1, r[:, 4] * spatial_scale - off - y1
    if not aligned:
        roi_w, roi_h = roi_w.clamp(min=1.0), roi_h.clamp(min=1.0)
    if sampling_ratio > 0:
        grids = torch.full((r.shape[0], 2), sampling_ratio, dtype=torch.long, device=r.device)
    else:
        grids = torch.stack([torch.ceil(roi_h / oh), torch.ceil(roi_w / ow)], 1).long()
    for g_h, g_w in torch.unique(grids, dim=0).tolist():
        if g_h <= 0 or g_w <= 0:
            continue  # a bin without samples is 0
        sel = ((grids[:, 0] == g_h) & (grids[:, 1] == g_w)).nonzero().squeeze(1)
        for chunk in torch.split(sel, max(1, (1 << 23) // (oh * g_h * ow * g_w * c))):
            vy, yl, yh, wyl, wyh = axis_samples(y1[chunk], roi_h[chunk], oh, g_h, h)
            vx, xl, xh, wxl, wxh = axis_samples(x1[chunk], roi_w[chunk], ow, g_w, w)
            batch = r[chunk, 0].long()[:, None]
            val = 0
            for yi, wy in ((yl, wyl), (yh, wyh)):
                for xi, wx in ((xl, wxl), (xh, wxh)):
                    idx = (yi[:, :, None] * w + xi[:, None, :]).flatten(1)  # [R, P]
                    wgt = (wy[:, :, None] * wx[:, None, :]).flatten(1)  # [R, P]
                    val = val + wgt[..., None] * x_hwc[batch.expand_as(idx), idx]  # [R, P, C]
            val = val * (vy[:, :, None] & vx[:, None, :]).flatten(1)[..., None]
            val = val.view(len(chunk), oh, g_h, ow, g_w, c)
            pooled = val.mean(dim=(2, 4)) if pool_mode == "avg" else val.amax(dim=(2, 4))
            yield chunk, pooled.permute(0, 3, 1, 2)


def reference_with_grad(x, rois, grad_out, output_size, spatial_scale, sampling_ratio, pool_mode, aligned=True):
    """Float64 RoIAlign (mmcv semantics) written with plain torch ops, no mmops
    and no torchvision: returns (output [K, C, oh, ow], input gradient for
    grad_out). Vectorised over rois of equal sampling grid, in chunks."""
    n, c, h, w = x.shape
    x_hwc = x.detach().to(torch.float64).permute(0, 2, 3, 1).reshape(n, h * w, c)
    x_hwc = x_hwc.clone(memory_format=torch.contiguous_format).requires_grad_(True)
    out = x_hwc.new_zeros((rois.shape[0], c) + tuple(output_size))
    grad = torch.zeros_like(x_hwc)
    g64 = grad_out.to(torch.float64)
    with torch.enable_grad():
        for chunk, pooled in _reference_chunks(
            x_hwc, (h, w), rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned
        ):
            out[chunk] = pooled.detach()
            grad += torch.autograd.grad(pooled, x_hwc, g64[chunk])[0]
    return out, grad.view(n, h, w, c).permute(0, 3, 1, 2)


def multi_level_reference_with_grad(
    feats, rois, grad_out, output_size, spatial_scales, sampling_ratio, pool_mode, aligned=True
):
    """The per-level loop over reference_with_grad, float64: returns (output
    [K, C, oh, ow], one input gradient per map). Levels from the float64 rois."""
    levels = map_roi_levels(rois.double(), len(feats))
    out = torch.zeros((rois.shape[0], feats[0].shape[1]) + tuple(output_size), dtype=torch.float64, device=rois.device)
    grads = []
    for lvl, (x, scale) in enumerate(zip(feats, spatial_scales)):
        idx = torch.where(levels == lvl)[0]
        out_l, grad_l = reference_with_grad(
            x, rois[idx], grad_out[idx], output_size, scale, sampling_ratio, pool_mode, aligned
        )
        out[idx] = out_l
        grads.append(grad_l)
    return out, grads


def tv_multi_level_roi_align(feats, rois, output_size, spatial_scales, sampling_ratio, aligned=True):
    """The baseline: mmdet's SingleRoIExtractor / torchvision's _multiscale_roi_align,
    one torchvision.ops.roi_align per level, scattered back by index."""
    levels = map_roi_levels(rois, len(feats))
    result = feats[0].new_zeros((rois.shape[0], feats[0].shape[1]) + tuple(output_size))
    for lvl, (x, scale) in enumerate(zip(feats, spatial_scales)):
        idx = torch.where(levels == lvl)[0]
        result[idx] = tv_roi_align(x, rois[idx], output_size, scale, sampling_ratio, aligned=aligned)
    return result


def rel_max_diff(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(max |out - ref|, that divided by max |ref|)."""
    diff = (out.double() - ref.double()).abs().max().item()
    scale = max(ref.double().abs().max().item(), 1e-12)
    return diff, diff / scale


def deterministic_timing(timer, fn) -> float:
    """timer(fn) with deterministic algorithms on (mmops then runs its gather backward)."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        return timer(fn)
    finally:
        torch.use_deterministic_algorithms(before)


def check_against_reference(out, grad, ref_out, ref_grad, mode, dtype) -> tuple[str, Optional[str]]:
    """(table text, problem or None) for one mmops result vs the float64 reference."""
    tol_fwd, tol_bwd = TOLERANCE[dtype]
    _, fwd_rel = rel_max_diff(out, ref_out)
    bwd_abs, bwd_rel = rel_max_diff(grad, ref_grad)
    text = f"{fwd_rel:.0e}/{bwd_rel:.0e}"
    bwd_ok = bwd_rel <= tol_bwd
    if mode == "max" and not bwd_ok:
        # A bin whose best two samples tie to within rounding may pick the other
        # one: its gradient lands elsewhere (on at most 8 input elements per
        # bin). Allow such flips in up to 1e-5 of the bins.
        scale = bwd_abs / max(bwd_rel, 1e-30)
        off = int(((grad.double() - ref_grad).abs() > tol_bwd * scale).sum())
        bwd_ok = off <= 64 + 8e-5 * out.numel()
        text = f"{fwd_rel:.0e}/{off} el"
    if fwd_rel <= tol_fwd and bwd_ok:
        return text, None
    return text + " !", (
        f"forward rel err {fwd_rel:.2e} (tol {tol_fwd:.0e}), input grad rel err {bwd_rel:.2e} (tol {tol_bwd:.0e})"
    )


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def bench_rows(
    case, dtype_name, layout_name, modes, timer, problems, xs, xs_req, grad_out, mm, tv, reference
) -> list[FwdBwdRow]:
    """Checks then times one configuration for each pool mode. xs / xs_req are the
    feature maps (without / with requires_grad); mm(maps, mode) and tv(maps) pool
    with mmops and with the torchvision baseline; reference(mode) gives the float64
    (output, flat input gradient)."""
    dtype = DTYPES[dtype_name]
    label = f"{case.name}/{dtype_name}/{layout_name}"

    def mm_fb(mode):
        return torch.autograd.grad(mm(xs_req, mode), xs_req, grad_out)

    rows = []
    for mode in modes:
        row = FwdBwdRow((case.name, dtype_name, layout_name, mode))
        rows.append(row)

        # --- correctness, once per configuration: vs the float64 reference on
        # the same (already rounded) inputs, and vs torchvision in fp32 -------
        try:
            out = mm(xs_req, mode)
            grad = flat(torch.autograd.grad(out, xs_req, grad_out))
        except Exception as exc:  # report, and go on with the other rows
            row.check = "ERROR"
            problems.append(f"{label}/{mode}: mmops raised {type(exc).__name__}: {exc}")
            continue
        ref_out, ref_grad = reference(mode)
        row.check, problem = check_against_reference(out, grad, ref_out, ref_grad, mode, dtype)
        if problem:
            problems.append(f"{label}/{mode}: mmops vs float64 reference: {problem}")
        if mode == "avg" and dtype == torch.float32 and tv_roi_align is not None:
            with torch.no_grad():
                _, tv_rel = rel_max_diff(tv(xs), out)
            if tv_rel > TOLERANCE[dtype][0]:
                row.check += " !"
                problems.append(f"{label}/avg: mmops and torchvision outputs differ (rel {tv_rel:.2e})")
        del out, grad, ref_out, ref_grad

        # --- timing --------------------------------------------------------
        with torch.no_grad():
            row.mm_fwd = timer(lambda: mm(xs, mode))
        row.mm_fb = timer(lambda: mm_fb(mode))
        row.extra["det"] = deterministic_timing(timer, lambda: mm_fb(mode))
        if mode == "avg" and tv_roi_align is not None:
            try:
                with torch.no_grad():
                    tv(xs)  # torchvision lacks some dtype kernels (bf16 on some versions)
                row.base_fwd = timer(lambda: tv(xs))
                row.base_fb = timer(lambda: torch.autograd.grad(tv(xs_req), xs_req, grad_out, allow_unused=True))
            except (RuntimeError, NotImplementedError):
                pass
    return rows


def make_grad_out(case, out_hw, device, dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    return torch.randn((case.num_rois, case.shape[1]) + out_hw, generator=gen).to(device, dtype)


def bench_config(case, dtype_name, layout_name, modes, run, timer, problems) -> list[FwdBwdRow]:
    """One roi_align configuration: mmops.roi_align against torchvision.ops.roi_align."""
    if case.strides:
        return bench_multi_level_config(case, dtype_name, layout_name, modes, run.device, timer, problems)
    device = run.device
    dtype, fmt = DTYPES[dtype_name], LAYOUTS[layout_name]
    features, rois = make_inputs(case)
    x = features.to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    boxes = rois.to(device=device, dtype=dtype)
    out_hw = (case.output_size, case.output_size)
    args = (out_hw, case.spatial_scale, case.sampling_ratio)
    grad_out = make_grad_out(case, out_hw, device, dtype)

    def mm(maps, mode):
        return mmops.roi_align(maps[0], boxes, *args, pool_mode=mode, aligned=True)

    def tv(maps):
        return tv_roi_align(maps[0], boxes, *args, aligned=True)

    def reference(mode):
        ref_out, ref_grad = reference_with_grad(x, boxes, grad_out, *args, mode)
        return ref_out, ref_grad.reshape(-1)

    x_req = x.detach().clone(memory_format=fmt).requires_grad_(True)
    return bench_rows(case, dtype_name, layout_name, modes, timer, problems, [x], [x_req], grad_out, mm, tv, reference)


def bench_multi_level_config(case, dtype_name, layout_name, modes, device, timer, problems) -> list[FwdBwdRow]:
    """A multi-level configuration: mmops.multi_level_roi_align against the
    per-level torchvision loop; gradients w.r.t. every map."""
    dtype, fmt = DTYPES[dtype_name], LAYOUTS[layout_name]
    features, rois = make_multi_level_inputs(case)
    xs = [f.to(device=device, dtype=dtype).contiguous(memory_format=fmt) for f in features]
    boxes = rois.to(device=device, dtype=dtype)
    out_hw = (case.output_size, case.output_size)
    scales = [1.0 / s for s in case.strides]
    grad_out = make_grad_out(case, out_hw, device, dtype)

    def mm(maps, mode):
        return torch.ops.mmops.multi_level_roi_align(
            maps, boxes, list(out_hw), scales, case.sampling_ratio, mode, True, FINEST_SCALE
        )

    def tv(maps):
        return tv_multi_level_roi_align(maps, boxes, out_hw, scales, case.sampling_ratio, aligned=True)

    def reference(mode):
        ref_out, ref_grads = multi_level_reference_with_grad(
            xs, boxes, grad_out, out_hw, scales, case.sampling_ratio, mode
        )
        return ref_out, flat(ref_grads)

    xs_req = [x.detach().clone(memory_format=fmt).requires_grad_(True) for x in xs]
    return bench_rows(case, dtype_name, layout_name, modes, timer, problems, xs, xs_req, grad_out, mm, tv, reference)


def case_line(c: Case) -> str:
    n, ch, h, w = c.shape
    if c.strides:
        maps = ", ".join(f"{s[2]}x{s[3]}" for s in level_shapes(c))
        per_level = torch.bincount(
            map_roi_levels(make_multi_level_inputs(c)[1], len(c.strides)), minlength=len(c.strides)
        ).tolist()
        return (
            f"  {c.name:10s} input {n}x{ch}x{{{maps}}}, strides {'/'.join(map(str, c.strides))}, "
            f"{c.num_rois} rois (per level {'/'.join(map(str, per_level))}), "
            f"{c.output_size}x{c.output_size}, sampling_ratio {c.sampling_ratio}, aligned, "
            f"finest_scale {FINEST_SCALE}"
        )
    return (
        f"  {c.name:10s} input {n}x{ch}x{h}x{w}, scale 1/{round(1 / c.spatial_scale)}, {c.num_rois} rois, "
        f"{c.output_size}x{c.output_size}, sampling_ratio {c.sampling_ratio}, aligned"
    )


def main() -> int:
    return benchmark_main(
        __doc__,
        "roi_align benchmark",
        iters=(100, 20),
        warmup=(10, 3),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            LAYOUT_OPTION,
            ListOption("modes", ("avg", "max"), ["avg", "max"], ["avg", "max"], looped=False),
        ],
        bench=bench_config,
        labels=("case", "dtype", "layout", "mode"),
        baseline="torchvision",
        after=[
            ("mmops det fwd+bwd ms", lambda r: fmt_ms(r.extra.get("det"))),
            ("det/default", lambda r: fmt_ratio(r.extra.get("det"), r.mm_fb)),
        ],
        notes="; rel err = max|mmops - float64 reference| / max|reference|, output / input grad",
        case_line=case_line,
    )


if __name__ == "__main__":
    sys.exit(main())
