"""Tests of mmops::multi_level_roi_align (FPN RoIAlign in one op).

The conformance cases (conformance.py: opcheck, torch.compile, torch.export,
TorchScript, CUDA == CPU, empty and bad inputs); on the CPU an independent float64
reference (mmdet's level rule written here in Python + roi_align_reference.roi_align_ref
per level), known values of the level rule, gradients, gradcheck, the Python API and
special inputs; on CUDA (skipped without a GPU) the float64 reference, deterministic
backward, channels-last, CUDA graphs.
"""

import contextlib
import math
from typing import List

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import (
    TOL,
    capture_cuda_graph,
    deterministic_algorithms,
    random_rois,
    requires_torchvision,
    with_batch_index,
)
from roi_align_reference import max_mode_margin, roi_align_ref
from torch import Tensor

import mmops

op = torch.ops.mmops.multi_level_roi_align
single = torch.ops.mmops.roi_align

STRIDES = [4, 8, 16, 32]
SCALES = [1.0 / s for s in STRIDES]
# image of the small test pyramid: level l is [N, C, IMG_H / 4 / 2^l, IMG_W / 4 / 2^l]
IMG_H, IMG_W = 256, 384
# The pyramid tests' boxes reach feature coordinates of a few hundred, where one
# float32 ulp is 1.5e-5: float32 sample positions cost a few 1e-5 (seen: 1.7e-5).
PYR_TOL = dict(TOL)
PYR_TOL[torch.float32] = dict(atol=1e-4, rtol=1e-4)
LOW_TOL = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}


# --------------------------------------------------------------------------- reference


def ref_levels(rois, num_levels, finest_scale=56):
    """mmdet's map_roi_levels, in the rois' dtype (float32 for 16-bit rois, whose
    coordinates the kernels read into float): floor(log2(sqrt(w * h) / finest_scale
    + 1e-6)) clamped to [0, L - 1]; NaN (negative area) goes to level 0."""
    r = rois.detach().cpu()
    r = r if r.dtype == torch.float64 else r.float()
    scale = torch.sqrt((r[:, 3] - r[:, 1]) * (r[:, 4] - r[:, 2]))
    level = torch.floor(torch.log2(scale / finest_scale + 1e-6))
    level = torch.where(torch.isnan(level), torch.zeros_like(level), level)
    return level.clamp(0, num_levels - 1).long()


def multi_level_ref(feats, rois, output_size, scales, sampling_ratio=0, pool_mode="avg", aligned=True, finest_scale=56):
    """Float64 [K, C, oh, ow]: every roi pooled by roi_align_ref from its level's map.
    Differentiable w.r.t. every map (through roi_align_ref)."""
    levels = ref_levels(rois, len(feats), finest_scale)
    oh, ow = output_size
    pieces, order = [], []
    for lvl, f in enumerate(feats):
        idx = (levels == lvl).nonzero().squeeze(1)
        if idx.numel():
            pieces.append(
                roi_align_ref(f, rois[idx.to(rois.device)], (oh, ow), scales[lvl], sampling_ratio, pool_mode, aligned)
            )
            order.append(idx)
    if not pieces:
        return torch.zeros(rois.shape[0], feats[0].shape[1], oh, ow, dtype=torch.float64, device=feats[0].device)
    return torch.cat(pieces)[torch.argsort(torch.cat(order)).to(feats[0].device)]


def multi_level_ref_grads(feats, rois, grad_out, **kwargs):
    """Expected float64 gradient of sum(out * grad_out) w.r.t. each map."""
    xs = [f.detach().to(torch.float64).requires_grad_(True) for f in feats]
    with torch.enable_grad():
        out = multi_level_ref(xs, rois, **kwargs)
        if not out.requires_grad:
            return [torch.zeros_like(x) for x in xs]
        grads = torch.autograd.grad(out, xs, grad_out.detach().to(torch.float64), allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, xs)]


def pyramid(num_levels, N=2, C=4, dtype=torch.float64, seed=0, device="cpu"):
    """Maps of strides 4, 8, ... of the IMG_H x IMG_W image (base 64x96)."""
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(N, C, -(-IMG_H // s), -(-IMG_W // s), generator=gen, dtype=torch.float64).to(
            dtype=dtype, device=device
        )
        for s in STRIDES[:num_levels]
    ]


# Special boxes (batch, x1, y1, x2, y2) with the level they get with 4 levels
SPECIAL_ROIS = [
    ([0, 10.0, 20.0, 10.0, 60.0], 0),  # zero area (x1 == x2)
    ([1, 50.0, 40.0, 50.0, 40.0], 0),  # a point
    ([0, 120.0, 30.0, 60.0, 90.0], 0),  # x2 < x1: negative area, NaN scale -> 0
    ([1, 330.0, 210.0, 130.0, 30.0], 1),  # x2 < x1 and y2 < y1: area 200 * 180 -> 1
    ([0, 30.2, 40.1, 31.0, 40.6], 0),  # tiny
    ([1, -2000.0, -1500.0, 2400.0, 1900.0], 3),  # huge: log2 ~ 6.3, clamped to the top
    ([0, 0.0, 0.0, 5000.0, 3000.0], 3),  # huge, beyond the image
    ([1, 100.0, 100.0, 212.0, 212.0], 1),  # exactly 112 px: log2(2 + 1e-6) -> 1
    ([0, 8.0, 8.0, 64.0, 64.0], 0),  # exactly 56 px -> 0
]


def spread_rois(N=2, num=48, dtype=torch.float64, seed=0, device="cpu", special=True):
    """[K, 5] rois in the IMG_H x IMG_W image whose sizes cover all four levels:
    side log-uniform in [8, 900] px, aspect ratio in [1/3, 3], centres up to 10%
    outside the image; then conftest.random_rois' boxes (its special ones: tiny,
    degenerate, reversed, outside, covering) and SPECIAL_ROIS."""
    gen = torch.Generator().manual_seed(seed)
    f64 = dict(dtype=torch.float64)
    side = torch.exp(torch.rand(num, generator=gen, **f64) * math.log(900 / 8) + math.log(8))
    ratio = torch.exp((torch.rand(num, generator=gen, **f64) * 2 - 1) * math.log(3))
    w, h = side * ratio.sqrt(), side / ratio.sqrt()
    cx = (torch.rand(num, generator=gen, **f64) * 1.2 - 0.1) * IMG_W
    cy = (torch.rand(num, generator=gen, **f64) * 1.2 - 0.1) * IMG_H
    b = torch.randint(0, N, (num,), generator=gen).to(torch.float64)
    parts = [torch.stack([b, cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)]
    if special:
        parts.append(random_rois(10, N, IMG_H, IMG_W, dtype=torch.float64, generator=gen))
        parts.append(torch.tensor([r for r, _ in SPECIAL_ROIS], **f64))
    return torch.cat(parts).to(dtype=dtype, device=device)


def fwd_bwd(feats, rois, grad_out, *args):
    xs = [f.detach().requires_grad_(True) for f in feats]
    out = op(xs, rois, *args)
    grads = torch.autograd.grad(out, xs, grad_out)
    return out, list(grads)


def cuda_problem(C, num, out, sampling_ratio, pool_mode, dtype, seed, special=True):
    """CUDA maps (pyramid of 4, seed), rois (spread_rois, seed + 1), a random output
    gradient (torch's global generator) and the op's arguments after (maps, rois)."""
    feats = pyramid(4, C=C, dtype=dtype, seed=seed, device="cuda")
    rois = spread_rois(num=num, dtype=dtype, seed=seed + 1, device="cuda", special=special)
    go = torch.randn(rois.shape[0], C, out, out, device="cuda").to(dtype)
    return feats, rois, go, ([out, out], SCALES, sampling_ratio, pool_mode, True)


def test_reference_level_rule_on_special_rois():
    rois = torch.tensor([r for r, _ in SPECIAL_ROIS], dtype=torch.float64)
    assert ref_levels(rois, 4).tolist() == [lvl for _, lvl in SPECIAL_ROIS]
    assert ref_levels(rois.float(), 4).tolist() == [lvl for _, lvl in SPECIAL_ROIS]


# --------------------------------------------------------------------------- conformance


def _sample(L, N, C, num, options, other=None, special=False, seed=95):
    """sample(device, dtype, size): L maps of the small pyramid and spread rois; size 1:
    other (N, C, num) and every map cut to other sizes."""

    def make(device, dtype, size):
        n, c, k = (N, C, num) if size == 0 else other
        feats = pyramid(L, N=n, C=c, dtype=dtype, seed=seed + size, device=device)
        if size:
            feats = [f[:, :, : f.shape[2] - 1 - i, : f.shape[3] - 2].contiguous() for i, f in enumerate(feats)]
        rois = spread_rois(N=n, num=k, dtype=dtype, seed=seed + 10 + size, device=device, special=special)
        return Sample((feats, rois, *options))

    return make


def _empty(mode):
    def make(device, dtype):
        f = dict(dtype=dtype, device=device)
        no_channels = [torch.randn(2, 0, 8, 8, **f), torch.randn(2, 0, 4, 4, **f)]
        return [
            Sample(
                (
                    pyramid(4, C=3, dtype=dtype, seed=80, device=device),
                    torch.zeros(0, 5, **f),
                    [2, 3],
                    SCALES,
                    2,
                    mode,
                    True,
                    56,
                ),
                out_shapes=[(0, 3, 2, 3)],
            ),  # no rois
            Sample(
                (
                    pyramid(2, C=3, dtype=dtype, seed=81, device=device),
                    torch.zeros(0, 5, **f),
                    [2, 2],
                    SCALES[:2],
                    2,
                    mode,
                    True,
                    56,
                ),
                out_shapes=[(0, 3, 2, 2)],
            ),  # no rois, two levels
            Sample(
                (
                    no_channels,
                    spread_rois(num=3, seed=143, special=False)[:3].to(**f),
                    [2, 2],
                    [0.25, 0.125],
                    2,
                    mode,
                    True,
                    56,
                ),
                out_shapes=[(3, 0, 2, 2)],
            ),  # no channels
        ]

    return make


def _cuda_samples(mode):
    """CUDA == CPU on pyramids of 4, 3 and 1 levels, aligned or not; 16-bit argmax
    near-ties may pick another sample: no max-mode gradients in 16 bits."""

    def make(dtype):
        low = dtype in (torch.float16, torch.bfloat16)
        for aligned in (True, False):
            for num_levels, sr in ((4, 0), (4, 2), (3, 1), (1, 2)):
                feats = pyramid(num_levels, C=5, dtype=dtype, seed=200 + num_levels + sr)
                rois = spread_rois(dtype=dtype, seed=210 + sr)
                yield Sample(
                    (feats, rois, [3, 4], SCALES[:num_levels], sr, mode, aligned, 56), grads=not (low and mode == "max")
                )

    return make


def _cuda_tol(dtype, what, expected, sample):
    return PYR_TOL[dtype] if dtype in PYR_TOL else LOW_TOL[dtype]


class _Net(torch.nn.Module):
    """multi_level_roi_align in a model: MultiLevelRoIAlign modules and the op, both modes."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.MultiLevelRoIAlign((3, 2), [4, 8, 16], 2, "avg", True)
        self.unaligned = mmops.MultiLevelRoIAlign(2, [4, 8, 16], 0, "avg", False)
        self.avg = mmops.MultiLevelRoIAlign((2, 3), [4, 8, 16], 2, "avg", False, 40)
        self.max = mmops.MultiLevelRoIAlign((2, 3), [4, 8, 16], 2, "max", False, 40)

    def forward(self, feats: List[Tensor], rois: Tensor):
        y = torch.ops.mmops.multi_level_roi_align(
            [f * 1.5 - 0.25 for f in feats], rois, [3, 2], [0.25, 0.125, 0.0625], 2, "max", False, 56
        )
        z = torch.ops.mmops.multi_level_roi_align(feats, rois, [3, 2], [0.25, 0.125, 0.0625], 0, "avg", True, 40)
        computed = (y.sin() + 2 * z).sum(dim=1)
        net = (
            self.pool([f * 2.0 for f in feats], rois)
            + torch.ops.mmops.multi_level_roi_align(
                feats, rois, [3, 2], [0.25, 0.125, 0.0625], 0, "max", False, 40
            ).relu()
        )
        mixed = self.unaligned(feats, rois) * 2 + torch.ops.mmops.multi_level_roi_align(
            feats, rois, [2, 2], [0.25, 0.125, 0.0625], 2, "max", True, 56
        )
        return computed, net, mixed, self.avg(feats, rois), self.max(feats, rois)


def _helpers(sample):
    feats, rois, out_size, scales, *options = sample.args
    fwd = torch.ops.mmops._multi_level_roi_align_forward
    bwd = torch.ops.mmops._multi_level_roi_align_backward
    out, argmax = fwd(*sample.args)
    sizes = [feats[0].shape[0], feats[0].shape[1]] + [s for f in feats for s in f.shape[2:]]
    return [(fwd, sample.args), (bwd, (torch.randn_like(out), rois, argmax, sizes, scales, *options))]


def _set(lst, i, v):
    lst = list(lst)
    lst[i] = v
    return lst


_BATCH_INDEX = {
    f"batch_index_{v}": BadInput(lambda f, r, *o, v=v: (f, with_batch_index(r, 3, v), *o), "batch index")
    for v in (-1.0, 2.0, 9.0, math.nan)
}

# (make args from the good (feats, rois, ...), regex the message must match); meta: the Meta
# kernel (torch.compile / export) validates the same way
BAD_INPUTS = {
    "empty_features": BadInput(lambda f, r, *_: ([], r, [2, 2], []), "feature"),
    "empty_features_with_scales": BadInput(lambda f, r, *_: ([], r, [2, 2], SCALES[:3]), "feature"),
    "features_1_batch": BadInput(lambda f, r, *_: (_set(f, 1, f[1][:1]), r, [2, 2], SCALES[:3]), r"features\[1\]"),
    "features_1_channels": BadInput(
        lambda f, r, *_: (_set(f, 1, f[1][:, :2]), r, [2, 2], SCALES[:3]), r"features\[1\]", meta=True
    ),
    "features_2_channels": BadInput(
        lambda f, r, *_: (_set(f, 2, torch.cat([f[2], f[2]], 1)), r, [2, 2], SCALES[:3]), r"features\[2\]"
    ),
    "features_1_dtype": BadInput(lambda f, r, *_: (_set(f, 1, f[1].double()), r, [2, 2], SCALES[:3]), r"features\[1\]"),
    "features_1_half": BadInput(lambda f, r, *_: (_set(f, 1, f[1].half()), r, [2, 2], SCALES[:3]), r"features\[1\]"),
    "features_0_3d": BadInput(
        lambda f, r, *_: (_set(f, 0, f[0][0]), r, [2, 2], SCALES[:3]), r"features\[0\]", meta=True
    ),
    "features_0_5d": BadInput(lambda f, r, *_: (_set(f, 0, f[0][None]), r, [2, 2], SCALES[:3]), r"features\[0\]"),
    "features_2_3d": BadInput(lambda f, r, *_: (_set(f, 2, f[2][0]), r, [2, 2], SCALES[:3]), r"features\[2\]"),
    "features_int": BadInput(lambda f, r, *_: ([x.int() for x in f], r, [2, 2], SCALES[:3]), r"features\[0\]"),
    "fewer_scales": BadInput(lambda f, r, *_: (f, r, [2, 2], SCALES[:2]), "spatial scale", meta=True),
    "more_scales": BadInput(lambda f, r, *_: (f, r, [2, 2], SCALES), "spatial scale"),
    "no_scales": BadInput(lambda f, r, *_: (f, r, [2, 2], []), "spatial scale"),
    "scale_2_zero": BadInput(lambda f, r, *_: (f, r, [2, 2], [0.25, 0.125, 0.0]), r"spatial_scales\[2\]", meta=True),
    "scale_2_negative": BadInput(lambda f, r, *_: (f, r, [2, 2], [0.25, 0.125, -0.0625]), r"spatial_scales\[2\]"),
    "scale_1_nan": BadInput(lambda f, r, *_: (f, r, [2, 2], [0.25, math.nan, 0.0625]), r"spatial_scales\[1\]"),
    "scale_0_inf": BadInput(lambda f, r, *_: (f, r, [2, 2], [math.inf, 0.125, 0.0625]), r"spatial_scales\[0\]"),
    "nine_maps": BadInput(lambda f, r, *_: ([f[0]] * 9, r, [2, 2], [0.25] * 9), "8 feature maps"),
    "finest_scale_zero": BadInput(lambda f, r, *_: (f, r, [2, 2], SCALES[:3], 0, "avg", True, 0), "finest_scale"),
    "finest_scale_negative": BadInput(lambda f, r, *_: (f, r, [2, 2], SCALES[:3], 0, "avg", True, -56), "finest_scale"),
    "rois_1d": BadInput(lambda f, r, *_: (f, r[0], [2, 2], SCALES[:3]), "rois"),
    "rois_3d": BadInput(lambda f, r, *_: (f, r[None], [2, 2], SCALES[:3]), "rois"),
    "rois_4_cols": BadInput(lambda f, r, *_: (f, r[:, :4], [2, 2], SCALES[:3]), "rois", meta=True),
    "rois_6_cols": BadInput(lambda f, r, *_: (f, torch.cat([r, r[:, :1]], 1), [2, 2], SCALES[:3]), "rois"),
    "rois_dtype": BadInput(lambda f, r, *_: (f, r.double(), [2, 2], SCALES[:3]), "rois", meta=True),
    "rois_int": BadInput(lambda f, r, *_: (f, r.int(), [2, 2], SCALES[:3]), "rois"),
    "sampling_ratio_negative": BadInput(lambda f, r, *_: (f, r, [2, 2], SCALES[:3], -1), "sampling_ratio"),
    "pool_mode": BadInput(lambda f, r, *_: (f, r, [2, 2], SCALES[:3], 0, "sum"), "pool_mode"),
    "pool_mode_case": BadInput(lambda f, r, *_: (f, r, [2, 2], SCALES[:3], 0, "Max"), "pool_mode"),
    "output_h_zero": BadInput(lambda f, r, *_: (f, r, [0, 2], SCALES[:3]), "output_size"),
    "output_w_negative": BadInput(lambda f, r, *_: (f, r, [2, -3], SCALES[:3]), "output_size"),
    "features_1_on_cpu": BadInput(
        lambda f, r, *_: ([f[0].cuda(), f[1], f[2].cuda()], r.cuda(), [2, 2], SCALES[:3]), r"features\[1\]", cuda=True
    ),
    "rois_on_cpu": BadInput(lambda f, r, *_: ([x.cuda() for x in f], r, [2, 2], SCALES[:3]), "rois", cuda=True),
    **_BATCH_INDEX,
}


def _full_case(name, sample, mode, **more):
    """A case with the whole suite: empty inputs, CUDA samples, the float32 CPU
    reference and non-zero gradients to the maps; `mode` is the sample's pool mode."""
    return ConformanceCase(
        name,
        op,
        sample,
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty(mode),
        helpers=_helpers,
        cuda_samples=_cuda_samples(mode),
        cuda_tol=_cuda_tol,
        cpu_float32_reference=True,
        nonzero_grads=True,
        **more,
    )


CONFORMANCE = [
    _full_case(
        "multi_level_roi_align_avg_aligned",
        _sample(3, 2, 3, 20, ([2, 3], SCALES[:3], 2, "avg", True, 56), (3, 4, 31), special=True, seed=100),
        "avg",
        bad_inputs=BAD_INPUTS,
        module=_Net,
        script_grad_tol=dict(rtol=1e-6, atol=1e-6),
    ),
    _full_case(
        "multi_level_roi_align_max_unaligned_adaptive",
        _sample(4, 1, 2, 8, ([3, 3], SCALES, 0, "max", False, 56)),
        "max",
        dtype=torch.float64,
        bad_inputs=_BATCH_INDEX,
    ),
    ConformanceCase(
        "multi_level_roi_align_max_aligned_finest_28",
        op,
        _sample(2, 2, 4, 9, ([2, 2], SCALES[:2], 1, "max", True, 28)),
        dtypes=(),
        grad_args=(0,),
        helpers=_helpers,
    ),
]


class TestMultiLevelRoIAlignConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("num_levels", [1, 2, 3, 4])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_forward_matches_reference(pool_mode, aligned, sampling_ratio, num_levels, dtype):
    C = 3 + num_levels  # 4..7 channels
    feats = pyramid(num_levels, C=C, dtype=dtype, seed=num_levels)
    rois = spread_rois(dtype=dtype, seed=10 + num_levels)
    levels = ref_levels(rois, num_levels)
    assert set(levels.tolist()) == set(range(num_levels)), "every level must get rois"
    args = ([3, 4], SCALES[:num_levels], sampling_ratio, pool_mode, aligned)
    out = op(feats, rois, *args)
    assert out.dtype == dtype and out.shape == (rois.shape[0], C, 3, 4)
    exp = multi_level_ref(feats, rois, *args)
    for lvl in range(num_levels):  # every level pools something non-zero
        assert exp[levels == lvl].abs().sum() > 0, lvl
    torch.testing.assert_close(out, exp.to(dtype), **PYR_TOL[dtype])
    # the Python wrapper and the module give the same
    torch.testing.assert_close(mmops.multi_level_roi_align(feats, rois, (3, 4), *args[1:]), out, rtol=0, atol=0)
    m = mmops.MultiLevelRoIAlign((3, 4), STRIDES[:num_levels], sampling_ratio, pool_mode, aligned)
    torch.testing.assert_close(m(feats, rois), out, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_low_precision_forward_matches_reference(pool_mode, dtype):
    feats = pyramid(4, C=5, dtype=dtype, seed=3)
    rois = spread_rois(dtype=dtype, seed=4)
    args = ([3, 3], SCALES, 2, pool_mode, True)
    out = op(feats, rois, *args)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), multi_level_ref(feats, rois, *args), **TOL[dtype])
    if pool_mode == "avg":
        go = torch.randn(out.shape, dtype=torch.float64).to(dtype)
        _, grads = fwd_bwd(feats, rois, go, *args)
        exp = multi_level_ref_grads(
            feats, rois, go, output_size=[3, 3], scales=SCALES, sampling_ratio=2, pool_mode=pool_mode, aligned=True
        )
        for g, e in zip(grads, exp):
            assert g.dtype == dtype
            torch.testing.assert_close(g.double(), e, **TOL[dtype])


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_eight_levels(pool_mode):
    # the most levels allowed: strides 1..128 of the IMG_H x IMG_W image, finest_scale 4
    gen = torch.Generator().manual_seed(140)
    feats = [torch.randn(2, 3, IMG_H >> l, IMG_W >> l, generator=gen, dtype=torch.float64) for l in range(8)]
    scales = [1.0 / 2**l for l in range(8)]
    rois = spread_rois(seed=141)
    assert set(ref_levels(rois, 8, 4).tolist()) == set(range(8))
    args = ([2, 2], scales, 2, pool_mode, True, 4)
    go = torch.randn(rois.shape[0], 3, 2, 2, dtype=torch.float64)
    out, grads = fwd_bwd(feats, rois, go, *args)
    torch.testing.assert_close(out, multi_level_ref(feats, rois, *args), **TOL[torch.float64])
    exp = multi_level_ref_grads(
        feats, rois, go, output_size=[2, 2], scales=scales, sampling_ratio=2, pool_mode=pool_mode, finest_scale=4
    )
    for g, e in zip(grads, exp):
        assert e.abs().sum() > 0
        torch.testing.assert_close(g, e, **TOL[torch.float64])


def test_one_level_equals_roi_align():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 20, 24, dtype=torch.float64)
    rois = random_rois(15, 2, 20, 24, dtype=torch.float64, spatial_scale=0.25)
    for mode in ("avg", "max"):
        for aligned in (True, False):
            for sr in (0, 2):
                go = torch.randn(15, 3, 2, 3, dtype=torch.float64)
                out, (g,) = fwd_bwd([x], rois, go, [2, 3], [0.25], sr, mode, aligned, 56)
                xs = x.detach().requires_grad_(True)
                exp = single(xs, rois, [2, 3], 0.25, sr, mode, aligned)
                (gexp,) = torch.autograd.grad(exp, xs, go)
                torch.testing.assert_close(out, exp, rtol=0, atol=0)
                torch.testing.assert_close(g, gexp, rtol=0, atol=0)
    # with one level, finest_scale plays no part
    torch.testing.assert_close(
        op([x], rois, [2, 3], [0.25], 0, "avg", True, 1), single(x, rois, [2, 3], 0.25, 0, "avg", True), rtol=0, atol=0
    )


# --------------------------------------------------------------------------- level rule

# (w, h, level with finest_scale 56 and 4 levels), worked out by hand:
# floor(log2(sqrt(w * h) / 56 + 1e-6)) clamped to [0, 3]
LEVEL_CASES = [
    (55.9, 55.9, 0),  # log2(0.9982) < 0 -> -1 -> clamped to 0
    (56.0, 56.0, 0),  # log2(1 + 1e-6) = 1.4e-6 -> 0
    (111.0, 111.0, 0),  # log2(1.982) = 0.987 -> 0
    (112.0, 112.0, 1),  # log2(2 + 1e-6) -> 1
    (224.0, 224.0, 2),  # log2(4 + 1e-6) -> 2
    (448.0, 448.0, 3),  # log2(8 + 1e-6) -> 3
    (500.0, 500.0, 3),  # log2(8.93) = 3.16 -> 3
    (1000.0, 1000.0, 3),  # log2(17.9) = 4.2 -> clamped to 3
    (28.0, 112.0, 0),  # sqrt = 56
    (56.0, 224.0, 1),  # sqrt = 112
    (112.0, 448.0, 2),  # sqrt = 224
    (0.0, 300.0, 0),  # zero area: log2(1e-6) -> clamped to 0
    (-60.0, 300.0, 0),  # x2 < x1: sqrt of a negative area is NaN -> 0
]
# float64 only: the 1e-6 in the rule decides (111.99995 / 56 = 1.99999911)
LEVEL_CASES_F64 = [
    (111.99995, 111.99995, 1),  # 1.99999911 + 1e-6 >= 2 -> 1
    (111.9999, 111.9999, 0),  # 1.99999821 + 1e-6 < 2 -> 0
]


def _level_pyramid(num_levels, dtype, seed=0):
    """4 levels of a 512x512 image, strides 4..32, different values on every level."""
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(1, 2, 512 // s, 512 // s, generator=gen, dtype=torch.float64).to(dtype)
        for s in STRIDES[:num_levels]
    ]


def _assert_levels(feats, boxes, expected, scales, finest_scale, aligned, dtype):
    """The op pools each box from exactly the expected level's map."""
    rois = torch.tensor([[0.0, 20.0, 30.0, 20.0 + w, 30.0 + h] for w, h in boxes], dtype=dtype)
    assert ref_levels(rois, len(feats), finest_scale).tolist() == expected  # the hand values
    out = op(feats, rois, [3, 3], scales, 2, "avg", aligned, finest_scale)
    per_level = [single(f, rois, [3, 3], s, 2, "avg", aligned) for f, s in zip(feats, scales)]
    for k, lvl in enumerate(expected):
        torch.testing.assert_close(out[k], per_level[lvl][k], rtol=0, atol=0, msg=lambda m: f"box {boxes[k]}: {m}")
        for other in range(len(feats)):
            if other != lvl:  # the maps differ, so this pins the level down
                assert not torch.allclose(out[k], per_level[other][k]), (boxes[k], other)


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_level_rule_known_values(dtype, aligned):
    cases = LEVEL_CASES + (LEVEL_CASES_F64 if dtype == torch.float64 else [])
    if aligned:  # an aligned reversed box pools zeros on every level: nothing to tell apart
        cases = [c for c in cases if c[0] >= 0 and c[1] >= 0 and c[0] * c[1] > 0]
    feats = _level_pyramid(4, dtype)
    _assert_levels(feats, [c[:2] for c in cases], [c[2] for c in cases], SCALES, 56, aligned, dtype)


def test_level_rule_clamps_to_available_levels():
    boxes = [(50.0, 50.0), (120.0, 120.0), (250.0, 250.0), (500.0, 500.0), (1500.0, 900.0)]
    for num_levels, expected in ((2, [0, 1, 1, 1, 1]), (3, [0, 1, 2, 2, 2])):
        feats = _level_pyramid(num_levels, torch.float64, seed=num_levels)
        _assert_levels(feats, boxes, expected, SCALES[:num_levels], 56, False, torch.float64)


@pytest.mark.parametrize(
    "finest_scale, expected",
    [
        # boxes of side 20, 56, 112, 224, 448
        (28, [0, 1, 2, 3, 3]),  # 56 / 28 = 2 -> 1, 112 -> 2, 224 -> 3
        (56, [0, 0, 1, 2, 3]),
        (112, [0, 0, 0, 1, 2]),  # 224 / 112 = 2 -> 1
        (10, [1, 2, 3, 3, 3]),  # log2(2) = 1, log2(5.6) = 2.5
        (500, [0, 0, 0, 0, 0]),
    ],
)
def test_finest_scale_changes_assignment(finest_scale, expected):
    boxes = [(20.0, 20.0), (56.0, 56.0), (112.0, 112.0), (224.0, 224.0), (448.0, 448.0)]
    feats = _level_pyramid(4, torch.float64, seed=5)
    _assert_levels(feats, boxes, expected, SCALES, finest_scale, False, torch.float64)


@pytest.mark.parametrize("finest_scale", [14, 100])
def test_finest_scale_matches_reference(finest_scale):
    feats = pyramid(4, C=3, seed=7)
    rois = spread_rois(seed=8)
    levels = ref_levels(rois, 4, finest_scale)
    assert not torch.equal(levels, ref_levels(rois, 4, 56))
    for mode in ("avg", "max"):
        args = ([2, 2], SCALES, 0, mode, True, finest_scale)
        torch.testing.assert_close(op(feats, rois, *args), multi_level_ref(feats, rois, *args), **TOL[torch.float64])


def test_default_arguments():
    feats = pyramid(3, C=3, seed=9)
    rois = spread_rois(seed=10)
    out = op(feats, rois, [2, 3], SCALES[:3])
    torch.testing.assert_close(out, op(feats, rois, [2, 3], SCALES[:3], 0, "avg", True, 56), rtol=0, atol=0)
    torch.testing.assert_close(out, multi_level_ref(feats, rois, [2, 3], SCALES[:3]), **TOL[torch.float64])
    kw = op(
        feats,
        rois,
        output_size=[2, 3],
        spatial_scales=SCALES[:3],
        sampling_ratio=1,
        pool_mode="max",
        aligned=False,
        finest_scale=30,
    )
    torch.testing.assert_close(
        kw, multi_level_ref(feats, rois, [2, 3], SCALES[:3], 1, "max", False, 30), **TOL[torch.float64]
    )


# --------------------------------------------------------------------------- backward


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_backward_matches_reference(pool_mode, aligned, dtype):
    for num_levels, sr in ((4, 0), (4, 2), (2, 1)):
        feats = pyramid(num_levels, C=3, dtype=dtype, seed=20 + num_levels + sr)
        rois = spread_rois(dtype=dtype, seed=30 + sr)
        go = torch.randn(rois.shape[0], 3, 3, 2, dtype=torch.float64).to(dtype)
        args = ([3, 2], SCALES[:num_levels], sr, pool_mode, aligned)
        out, grads = fwd_bwd(feats, rois, go, *args)
        exp = multi_level_ref_grads(
            feats, rois, go, output_size=[3, 2], scales=args[1], sampling_ratio=sr, pool_mode=pool_mode, aligned=aligned
        )
        assert len(grads) == num_levels
        for lvl, (g, e, f) in enumerate(zip(grads, exp, feats)):
            assert g.shape == f.shape and g.dtype == dtype
            assert e.abs().sum() > 0, f"level {lvl} should receive gradient"
            torch.testing.assert_close(g, e.to(dtype), **PYR_TOL[dtype])


@requires_torchvision
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_matches_torchvision_per_level_loop(sampling_ratio):
    # what mmdet does: map each roi to a level, then torchvision's roi_align per level
    import torchvision

    feats = pyramid(4, C=3, seed=260)
    rois = spread_rois(num=40, seed=261, special=False)
    levels = ref_levels(rois, 4)
    feats_g = [f.clone().requires_grad_(True) for f in feats]
    out = op(feats_g, rois, [3, 3], SCALES, sampling_ratio, "avg", True)
    feats_tv = [f.clone().requires_grad_(True) for f in feats]
    expected = torch.zeros_like(out)
    for lvl, f in enumerate(feats_tv):
        idx = (levels == lvl).nonzero().squeeze(1)
        if idx.numel():
            expected[idx] = torchvision.ops.roi_align(f, rois[idx], [3, 3], SCALES[lvl], sampling_ratio, True)
    assert len(set(levels.tolist())) == 4  # every level is exercised
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    go = torch.randn_like(out)
    grads = torch.autograd.grad(out, feats_g, go)
    grads_tv = torch.autograd.grad(expected, feats_tv, go)
    for g, gt in zip(grads, grads_tv):
        torch.testing.assert_close(g, gt, rtol=1e-12, atol=1e-12)


def test_backward_matches_per_level_roi_align():
    """Gradients equal those of the composite: torch.ops.mmops.roi_align per level."""
    feats = pyramid(4, C=4, dtype=torch.float64, seed=40)
    rois = spread_rois(dtype=torch.float64, seed=41)
    levels = ref_levels(rois, 4)
    for mode in ("avg", "max"):
        go = torch.randn(rois.shape[0], 4, 2, 2, dtype=torch.float64)
        out, grads = fwd_bwd(feats, rois, go, [2, 2], SCALES, 2, mode, True)
        xs = [f.detach().requires_grad_(True) for f in feats]
        exp = torch.zeros_like(out)
        for lvl in range(4):
            idx = (levels == lvl).nonzero().squeeze(1)
            exp = exp.index_copy(0, idx, single(xs[lvl], rois[idx], [2, 2], SCALES[lvl], 2, mode, True))
        gexp = torch.autograd.grad(exp, xs, go)
        torch.testing.assert_close(out, exp, rtol=0, atol=0)
        for g, e in zip(grads, gexp):
            torch.testing.assert_close(g, e, **TOL[torch.float64])


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_levels_without_rois_get_zero_gradient(pool_mode):
    feats = pyramid(4, C=3, seed=50)
    # only levels 0 and 2 get rois (sides 40 and 300)
    rois = torch.tensor(
        [
            [0, 10.0, 12.0, 50.0, 52.0],
            [1, 100.0, 40.0, 140.0, 80.0],
            [0, 20.0, 10.0, 320.0, 310.0],
            [1, 60.0, 0.0, 360.0, 250.0],
        ],
        dtype=torch.float64,
    )
    assert ref_levels(rois, 4).tolist() == [0, 0, 2, 2]
    go = torch.randn(4, 3, 2, 2, dtype=torch.float64)
    _, grads = fwd_bwd(feats, rois, go, [2, 2], SCALES, 2, pool_mode, True)
    for lvl in (1, 3):
        assert grads[lvl].shape == feats[lvl].shape
        assert torch.equal(grads[lvl], torch.zeros_like(feats[lvl]))
    for lvl in (0, 2):
        assert grads[lvl].abs().sum() > 0
    exp = multi_level_ref_grads(
        feats, rois, go, output_size=[2, 2], scales=SCALES, sampling_ratio=2, pool_mode=pool_mode, aligned=True
    )
    for g, e in zip(grads, exp):
        torch.testing.assert_close(g, e, **TOL[torch.float64])


def test_only_some_features_require_grad():
    feats = pyramid(3, C=3, seed=51)
    rois = spread_rois(seed=52)
    go = torch.randn(rois.shape[0], 3, 2, 2, dtype=torch.float64)
    x0, x1, x2 = feats[0], feats[1].clone().requires_grad_(True), feats[2]
    out = op([x0, x1, x2], rois, [2, 2], SCALES[:3], 2, "avg", True)
    (g1,) = torch.autograd.grad(out, x1, go)
    exp = multi_level_ref_grads(feats, rois, go, output_size=[2, 2], scales=SCALES[:3], sampling_ratio=2)
    torch.testing.assert_close(g1, exp[1], **TOL[torch.float64])


def test_same_tensor_as_two_levels_accumulates():
    torch.manual_seed(53)
    x = torch.randn(1, 2, 16, 16, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[0, 2.0, 3.0, 20.0, 30.0], [0, 1.0, 1.0, 60.0, 50.0]], dtype=torch.float64)
    out = op([x, x], rois, [2, 2], [0.25, 0.125], 2, "avg", True, 20)  # levels 0 and 1
    go = torch.randn_like(out)
    (g,) = torch.autograd.grad(out, x, go)
    exp = multi_level_ref_grads(
        [x, x], rois, go, output_size=[2, 2], scales=[0.25, 0.125], sampling_ratio=2, finest_scale=20
    )
    torch.testing.assert_close(g, exp[0] + exp[1], **TOL[torch.float64])
    assert exp[0].abs().sum() > 0 and exp[1].abs().sum() > 0


def _gradcheck_case():
    # 32x32 image, strides 4 and 8; finest_scale 10: sides 10..19 -> level 0, 20+ -> level 1
    rois = torch.tensor(
        [[0, 3.3, 4.1, 17.9, 15.2], [1, 6.2, 2.7, 14.8, 13.9], [1, 2.9, 3.6, 27.1, 26.3], [0, 5.1, 1.9, 29.2, 24.8]],
        dtype=torch.float64,
    )
    assert ref_levels(rois, 2, 10).tolist() == [0, 0, 1, 1]
    return rois


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_gradcheck_avg(sampling_ratio, aligned):
    torch.manual_seed(60)
    rois = _gradcheck_case()
    f0 = torch.randn(2, 2, 8, 8, dtype=torch.float64, requires_grad=True)
    f1 = torch.randn(2, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, b: op([a, b], rois, [2, 2], [0.25, 0.125], sampling_ratio, "avg", aligned, 10),
        (f0, f1),
        check_batched_grad=False,
    )


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_gradcheck_max(sampling_ratio, aligned):
    torch.manual_seed(61)
    rois = _gradcheck_case()
    # well separated values; the boxes lie inside the maps (no clamped duplicates)
    vals = torch.randperm(2 * 2 * 80, dtype=torch.float64) / 4.0
    f0 = vals[: 2 * 2 * 64].reshape(2, 2, 8, 8).clone().requires_grad_(True)
    f1 = vals[2 * 2 * 64 :].reshape(2, 2, 4, 4).clone().requires_grad_(True)
    for f, s, sel in ((f0, 0.25, [0, 1]), (f1, 0.125, [2, 3])):
        assert max_mode_margin(f, rois[sel], (2, 2), s, sampling_ratio, aligned) > 1e-3
    assert torch.autograd.gradcheck(
        lambda a, b: op([a, b], rois, [2, 2], [0.25, 0.125], sampling_ratio, "max", aligned, 10),
        (f0, f1),
        check_batched_grad=False,
    )


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_double_backward_raises(pool_mode):
    feats = [f.requires_grad_(True) for f in pyramid(2, N=1, C=2, seed=62)]
    rois = torch.tensor([[0, 4.0, 6.0, 40.0, 50.0], [0, 10.0, 8.0, 150.0, 160.0]], dtype=torch.float64)
    out = op(feats, rois, [2, 2], SCALES[:2], 2, pool_mode, True)
    go = torch.randn_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        gs = torch.autograd.grad(out, feats, go, create_graph=True)
        torch.autograd.grad(sum(g.sum() for g in gs), (*feats, go))
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.gradgradcheck(
            lambda a, b: op([a, b], rois, [2, 2], SCALES[:2], 2, pool_mode, True), tuple(feats)
        )
    # create_graph with a constant grad_output is fine
    out = op(feats, rois, [2, 2], SCALES[:2], 2, pool_mode, True)
    gs = torch.autograd.grad(out, feats, go.detach(), create_graph=True)
    exp = multi_level_ref_grads(
        feats, rois, go, output_size=[2, 2], scales=SCALES[:2], sampling_ratio=2, pool_mode=pool_mode
    )
    for g, e in zip(gs, exp):
        torch.testing.assert_close(g, e, **TOL[torch.float64])


# --------------------------------------------------------------------------- helper ops


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_helper_ops_match_public_op(pool_mode):
    feats = pyramid(3, C=3, seed=70)
    rois = spread_rois(seed=71)
    args = ([2, 3], SCALES[:3], 2, pool_mode, True, 56)
    out, argmax = torch.ops.mmops._multi_level_roi_align_forward(feats, rois, *args)
    assert argmax.dtype == torch.int32
    assert argmax.shape == (out.shape if pool_mode == "max" else (0,))
    go = torch.randn_like(out)
    out_ref, grads_ref = fwd_bwd(feats, rois, go, *args)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=0)
    sizes = [2, 3] + [s for f in feats for s in f.shape[2:]]
    grads = torch.ops.mmops._multi_level_roi_align_backward(go, rois, argmax, sizes, *args[1:])
    assert len(grads) == 3
    for g, e in zip(grads, grads_ref):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="feature_sizes"):
        torch.ops.mmops._multi_level_roi_align_backward(go, rois, argmax, sizes[:-2], *args[1:])


# --------------------------------------------------------------------------- special inputs


def test_functional_no_boxes():
    feats = pyramid(4, C=3, dtype=torch.float32, seed=80)
    out = mmops.multi_level_roi_align(feats, [torch.zeros(0, 4), torch.zeros(0, 4)], 2, SCALES)
    assert out.shape == (0, 3, 2, 2)


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_empty_map(pool_mode):
    # an empty level (H = 0) pools zeros for its rois; the other levels are unaffected
    feats = pyramid(3, C=2, seed=142)
    feats[1] = torch.randn(2, 2, 0, 48, dtype=torch.float64)
    rois = spread_rois(seed=143)
    levels = ref_levels(rois, 3)
    go = torch.randn(rois.shape[0], 2, 2, 2, dtype=torch.float64)
    out, grads = fwd_bwd(feats, rois, go, [2, 2], SCALES[:3], 2, pool_mode, True)
    assert (levels == 1).any() and torch.equal(out[levels == 1], torch.zeros_like(out[levels == 1]))
    keep = levels != 1
    torch.testing.assert_close(out[keep], multi_level_ref(feats, rois[keep], [2, 2], SCALES[:3], 2, pool_mode, True))
    assert [g.shape for g in grads] == [f.shape for f in feats]
    exp = multi_level_ref_grads(
        feats, rois[keep], go[keep], output_size=[2, 2], scales=SCALES[:3], sampling_ratio=2, pool_mode=pool_mode
    )
    for lvl in (0, 2):
        torch.testing.assert_close(grads[lvl], exp[lvl])


def _layouts(x):
    N, C, H, W = x.shape
    t = torch.empty(N, C, W, H, dtype=x.dtype).transpose(2, 3)
    t.copy_(x)
    s = torch.empty(N, 2 * C, H, 3 * W, dtype=x.dtype)[:, ::2, :, ::3]
    s.copy_(x)
    return {"channels_last": x.contiguous(memory_format=torch.channels_last), "transposed": t, "sliced": s}


@pytest.mark.parametrize("layout", ["channels_last", "transposed", "sliced", "mixed"])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_noncontiguous_features(pool_mode, layout):
    feats = pyramid(4, C=3, dtype=torch.float32, seed=81)
    rois = spread_rois(dtype=torch.float32, seed=82)
    if layout == "mixed":  # a different layout on every level
        views = [
            feats[0],
            _layouts(feats[1])["channels_last"],
            _layouts(feats[2])["sliced"],
            _layouts(feats[3])["transposed"],
        ]
    else:
        views = [_layouts(f)[layout] for f in feats]
    assert sum(not v.is_contiguous() for v in views) >= 3
    rois_nc = torch.empty(5, rois.shape[0]).t()
    rois_nc.copy_(rois)
    go = torch.randn(rois.shape[0], 3, 3, 2)
    args = ([3, 2], SCALES, 2, pool_mode, False)
    exp, gexp = fwd_bwd(feats, rois, go, *args)
    out, grads = fwd_bwd(views, rois_nc, go.transpose(0, 3).contiguous().transpose(0, 3), *args)
    torch.testing.assert_close(out, exp, rtol=0, atol=0)
    for g, e in zip(grads, gexp):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(exp.double(), multi_level_ref(feats, rois, *args), **PYR_TOL[torch.float32])


def test_nonfinite_rois_give_zeros():
    feats = [f.requires_grad_(True) for f in pyramid(3, C=2, seed=83)]
    rois = spread_rois(N=2, num=6, seed=84, special=False)
    bad = [(0, 1, math.nan), (1, 3, math.inf), (2, 4, -math.inf)]
    for row, col, v in bad:
        rois[row, col] = v
    for mode in ("avg", "max"):
        out = op(feats, rois, [2, 2], SCALES[:3], 0, mode, True)
        assert torch.equal(out[:3], torch.zeros_like(out[:3]))
        torch.testing.assert_close(out[3:], multi_level_ref(feats, rois[3:], [2, 2], SCALES[:3], 0, mode, True))
        go = torch.randn_like(out)
        grads = torch.autograd.grad(out, feats, go)
        exp = multi_level_ref_grads(
            feats, rois[3:], go[3:], output_size=[2, 2], scales=SCALES[:3], sampling_ratio=0, pool_mode=mode
        )
        for g, e in zip(grads, exp):
            assert torch.isfinite(g).all()
            torch.testing.assert_close(g, e)


def test_functional_list_of_boxes():
    feats = pyramid(3, N=3, C=2, seed=85)
    torch.manual_seed(86)
    boxes = [
        torch.tensor([[4.0, 5.0, 40.0, 60.0], [10.0, 0.0, 200.0, 180.0]], dtype=torch.float64),
        torch.zeros(0, 4, dtype=torch.float64),
        torch.tensor([[20.0, 30.0, 150.0, 90.0]], dtype=torch.float64),
    ]
    rois = torch.tensor(
        [[0, 4.0, 5.0, 40.0, 60.0], [0, 10.0, 0.0, 200.0, 180.0], [2, 20.0, 30.0, 150.0, 90.0]], dtype=torch.float64
    )
    for mode in ("avg", "max"):
        out = mmops.multi_level_roi_align(feats, boxes, (2, 3), SCALES[:3], 2, mode, False, 40)
        torch.testing.assert_close(out, op(feats, rois, [2, 3], SCALES[:3], 2, mode, False, 40), rtol=0, atol=0)
        torch.testing.assert_close(out, multi_level_ref(feats, rois, (2, 3), SCALES[:3], 2, mode, False, 40))
    assert mmops.multi_level_roi_align(feats, rois, 3, SCALES[:3]).shape == (3, 2, 3, 3)


# --------------------------------------------------------------------------- module


def test_module_attributes_and_repr():
    m = mmops.MultiLevelRoIAlign(7, [4, 8, 16, 32], sampling_ratio=2, pool_mode="max", aligned=False, finest_scale=28)
    assert m.output_size == [7, 7] and m.spatial_scales == SCALES and m.finest_scale == 28
    r = repr(m)
    assert r.startswith("MultiLevelRoIAlign(")
    for s in ("7", "[4, 8, 16, 32]", "max", "False", "28"):
        assert s in r, (s, r)
    assert len(list(m.parameters())) == 0
    with pytest.raises(ValueError, match="pool_mode"):
        mmops.MultiLevelRoIAlign(7, [4, 8], pool_mode="sum")
    feats = pyramid(4, C=2, seed=87)
    rois = spread_rois(seed=88)
    torch.testing.assert_close(m(feats, rois), op(feats, rois, [7, 7], SCALES, 2, "max", False, 28), rtol=0, atol=0)


# --------------------------------------------------------------------------- errors


def _good():
    return pyramid(3, C=3, dtype=torch.float32, seed=130), spread_rois(
        num=6, dtype=torch.float32, seed=131, special=False
    )


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
@pytest.mark.parametrize("batch_index", [-1.0, 2.0, 9.0, math.nan])
def test_bad_batch_index_raises_in_helper_op_on_cpu(batch_index, pool_mode):
    feats, rois = _good()
    rois[3, 0] = batch_index
    with pytest.raises(RuntimeError, match="batch index"):
        torch.ops.mmops._multi_level_roi_align_forward(feats, rois, [2, 2], SCALES[:3], 0, pool_mode, True, 56)


def test_bad_arguments_through_python_api():
    feats, rois = _good()
    with pytest.raises(RuntimeError, match="spatial scale"):
        mmops.multi_level_roi_align(feats, rois, 2, SCALES[:2])
    with pytest.raises(RuntimeError, match="spatial scale"):
        mmops.MultiLevelRoIAlign(2, [4, 8])(feats, rois)
    with pytest.raises(RuntimeError, match="finest_scale"):
        mmops.MultiLevelRoIAlign(2, [4, 8, 16], finest_scale=0)(feats, rois)
    with pytest.raises(ValueError, match="output_size"):
        mmops.multi_level_roi_align(feats, rois, (2, 2, 2), SCALES[:3])


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_matches_reference(pool_mode):
    feats = pyramid(4, C=6, seed=220, device="cuda")
    rois = spread_rois(seed=221, device="cuda")
    args = ([3, 3], SCALES, 0, pool_mode, True)
    out = op(feats, rois, *args)
    exp = multi_level_ref([f.cpu() for f in feats], rois.cpu(), *args)
    torch.testing.assert_close(out.cpu(), exp, **TOL[torch.float64])


@pytest.mark.cuda
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_levels_without_rois_get_zero_gradient(pool_mode):
    feats = [f.requires_grad_(True) for f in pyramid(4, C=3, dtype=torch.float32, seed=230, device="cuda")]
    rois = torch.tensor([[0, 10.0, 12.0, 50.0, 52.0], [1, 20.0, 10.0, 320.0, 310.0]], device="cuda")  # levels 0 and 2
    out = op(feats, rois, [2, 2], SCALES, 2, pool_mode, True)
    grads = torch.autograd.grad(out.sum(), feats)
    assert torch.equal(grads[1], torch.zeros_like(grads[1]))
    assert torch.equal(grads[3], torch.zeros_like(grads[3]))
    assert grads[0].abs().sum() > 0 and grads[2].abs().sum() > 0


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_deterministic_backward_is_bitwise_repeatable(pool_mode, dtype):
    # many overlapping rois on small maps: many adds land on the same values
    feats, rois, go, args = cuda_problem(70, 400, 5, 0, pool_mode, dtype, seed=240)
    with deterministic_algorithms():
        runs = [fwd_bwd(feats, rois, go, *args)[1] for _ in range(3)]
    for grads in runs[1:]:
        for g, g0 in zip(grads, runs[0]):
            assert torch.equal(g, g0)
    # default mode scatters with float atomics: equal up to rounding
    _, default = fwd_bwd(feats, rois, go, *args)
    tol = TOL[dtype] if dtype in (torch.float32, torch.float64) else LOW_TOL[dtype]
    for g, d in zip(runs[0], default):
        assert d.abs().sum() > 0
        torch.testing.assert_close(g.double(), d.double(), **tol)
    if dtype == torch.float64:
        _, cpu = fwd_bwd([f.cpu() for f in feats], rois.cpu(), go.cpu(), *args)
        for g, c in zip(runs[0], cpu):
            torch.testing.assert_close(g.cpu(), c, rtol=1e-10, atol=1e-10)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_channels_last_equals_contiguous(pool_mode, dtype):
    feats, rois, go, args = cuda_problem(96, 60, 7, 2, pool_mode, dtype, seed=250)
    out, grads = fwd_bwd(feats, rois, go, *args)
    cl = [f.contiguous(memory_format=torch.channels_last) for f in feats]
    mixed = [cl[0], feats[1], cl[2], feats[3]]
    # the float atomics add in another order: rounding differs, in the last bit of 16-bit types
    tol = TOL[dtype] if dtype == torch.float32 else LOW_TOL[dtype]
    for views in (cl, mixed):
        out_v, grads_v = fwd_bwd(views, rois, go, *args)
        assert torch.equal(out, out_v)
        for g, gv in zip(grads, grads_v):
            torch.testing.assert_close(g, gv, **tol)


@pytest.mark.cuda
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_graph_capture_forward_and_backward(pool_mode, deterministic):
    feats, rois, go, args = cuda_problem(8, 30, 3, 2, pool_mode, torch.float32, seed=260, special=False)
    feats = [f.requires_grad_(True) for f in feats]

    def step():
        out = op(feats, rois, *args)
        return (out, *torch.autograd.grad(out, feats, go))

    ctx = deterministic_algorithms() if deterministic else contextlib.nullcontext()
    with ctx:
        graph, static = capture_cuda_graph(step)
        for seed in (262, 263):
            new_feats = pyramid(4, C=8, dtype=torch.float32, seed=seed, device="cuda")
            with torch.no_grad():
                for f, n in zip(feats, new_feats):
                    f.copy_(n)
                rois.copy_(spread_rois(num=30, dtype=torch.float32, seed=seed, device="cuda", special=False))
                go.copy_(torch.randn_like(go))
            graph.replay()
            torch.cuda.synchronize()
            fresh = step()
            torch.testing.assert_close(static[0], fresh[0], rtol=0, atol=0)
            for a, b in zip(static[1:], fresh[1:]):
                assert b.abs().sum() > 0
                torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


# ---- hardening (issue 11): bounded work, no narrowing, our errors, non-finite rois ----

_MLOP = torch.ops.mmops.multi_level_roi_align


def _ml_inputs(device="cpu", dtype=torch.float64):
    feats = [
        torch.randn(1, 2, 8, 8, dtype=torch.float64).to(device, dtype),
        torch.randn(1, 2, 4, 4, dtype=torch.float64).to(device, dtype),
    ]
    rois = torch.tensor([[0, 1.0, 1.0, 20.0, 20.0], [0, 2.0, 2.0, 200.0, 200.0]], dtype=torch.float64).to(device, dtype)
    return feats, rois


@pytest.mark.parametrize("sampling_ratio", [513, 10000, 2**32 + 1, 2**62])
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_ml_sampling_ratio_bounded(sampling_ratio, device):
    feats, rois = _ml_inputs(device)
    with pytest.raises(RuntimeError, match="sampling_ratio must be at most 512"):
        _MLOP(feats, rois, [2, 2], [0.5, 0.25], sampling_ratio, "avg", True, 56)
    g = torch.ones(2, 2, 2, 2, dtype=torch.float64, device=device)
    with pytest.raises(RuntimeError, match="sampling_ratio must be at most 512"):
        torch.ops.mmops._multi_level_roi_align_backward(
            g,
            rois,
            torch.zeros(g.shape, dtype=torch.int32, device=device),
            [1, 2, 8, 8, 4, 4],
            [0.5, 0.25],
            sampling_ratio,
            "avg",
            True,
            56,
        )


@pytest.mark.parametrize("finest_scale", [2**24 + 1, 2**32 + 56, 2**62])
def test_ml_finest_scale_bounded(finest_scale):
    feats, rois = _ml_inputs()
    with pytest.raises(RuntimeError, match="finest_scale must be at most 2\\^24"):
        _MLOP(feats, rois, [2, 2], [0.5, 0.25], 2, "avg", True, finest_scale)


@pytest.mark.parametrize("output_size", [[4097, 2], [2**32 + 1, 1]])
def test_ml_huge_output_size_gives_our_error(output_size):
    feats, rois = _ml_inputs()
    with pytest.raises(RuntimeError, match="output_size values must be at most 4096"):
        _MLOP(feats, rois, output_size, [0.5, 0.25], 2, "avg", True, 56)


@pytest.mark.parametrize(
    "feature_sizes", [[1, 2, 8, 8, -4, 4], [1, -2, 8, 8, 4, 4], [1, 2, 8, 2**31, 4, 4], [2**62, 2, 8, 8, 4, 4]]
)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_ml_backward_feature_sizes_checked(feature_sizes, device):
    _, rois = _ml_inputs(device)
    c = abs(feature_sizes[1])
    g = torch.ones(2, c, 2, 2, dtype=torch.float64, device=device)
    with pytest.raises(RuntimeError, match="feature_sizes"):
        torch.ops.mmops._multi_level_roi_align_backward(
            g,
            rois,
            torch.zeros(g.shape, dtype=torch.int32, device=device),
            feature_sizes,
            [0.5, 0.25],
            2,
            "avg",
            True,
            56,
        )


def test_ml_backward_feature_sizes_overflow_on_meta():
    rois = torch.empty(2, 5, device="meta", dtype=torch.float64)
    g = torch.empty(2, 2**40, 2, 2, device="meta", dtype=torch.float64)
    with pytest.raises(RuntimeError, match="feature_sizes .* does not fit in int64"):
        torch.ops.mmops._multi_level_roi_align_backward(
            g,
            rois,
            torch.empty(0, dtype=torch.int32, device="meta"),
            [2**40, 2**40, 8, 8, 4, 4],
            [0.5, 0.25],
            2,
            "avg",
            True,
            56,
        )


_ML_NONFINITE = [
    [0, 1.0, 1.0, math.nan, 40.0],
    [0, 1.0, 1.0, 40.0, -math.inf],
    [0, 1.0, 1.0, -math.inf, 40.0],
    [0, math.nan, 1.0, 40.0, 40.0],
    [0, 1.0, 1.0, math.inf, 40.0],
]


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_ml_nonfinite_roi_pools_zeros_without_gradient(aligned, pool_mode):
    feats, good = _ml_inputs()
    feats = [f.requires_grad_() for f in feats]
    rois = torch.cat([good[:1], torch.tensor(_ML_NONFINITE, dtype=torch.float64), good[1:]])
    out = _MLOP(feats, rois, [2, 2], [0.5, 0.25], 0, pool_mode, aligned, 56)
    assert torch.equal(out[1:-1], torch.zeros_like(out[1:-1]))
    ref = multi_level_ref([f.detach() for f in feats], good, (2, 2), [0.5, 0.25], 0, pool_mode, aligned, 56)
    torch.testing.assert_close(out[[0, -1]], ref, rtol=1e-10, atol=1e-10)
    grads = torch.autograd.grad(out.sum(), feats)
    feats2 = [f.detach().clone().requires_grad_() for f in feats]
    grads2 = torch.autograd.grad(_MLOP(feats2, good, [2, 2], [0.5, 0.25], 0, pool_mode, aligned, 56).sum(), feats2)
    for a, b in zip(grads, grads2):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
@pytest.mark.parametrize("deterministic", [False, True])
def test_cuda_ml_nonfinite_rois_equal_cpu(dtype, aligned, pool_mode, deterministic):
    feats, good = _ml_inputs(dtype=dtype)
    rois = torch.cat([good[:1], torch.tensor(_ML_NONFINITE, dtype=dtype), good[1:]])
    feats = [f.requires_grad_() for f in feats]
    featsc = [f.detach().cuda().requires_grad_() for f in feats]
    out = _MLOP(feats, rois, [2, 2], [0.5, 0.25], 0, pool_mode, aligned, 56)
    grads = torch.autograd.grad(out.float().sum(), feats)
    with deterministic_algorithms() if deterministic else contextlib.nullcontext():
        outc = _MLOP(featsc, rois.cuda(), [2, 2], [0.5, 0.25], 0, pool_mode, aligned, 56)
        assert torch.equal(outc[1:-1].cpu(), torch.zeros_like(out[1:-1]))
        torch.testing.assert_close(outc.cpu(), out, **TOL[dtype])
        gradsc = torch.autograd.grad(outc.float().sum(), featsc)
    for a, b in zip(gradsc, grads):
        torch.testing.assert_close(a.cpu(), b, **TOL[dtype])
