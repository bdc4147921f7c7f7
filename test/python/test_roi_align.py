"""mmops::roi_align: the conformance cases, then CPU numerics against the float64
reference (known vectors, gradcheck, torchvision, special inputs), the Python API
and the CUDA-specific tests (all skipped without a GPU)."""

import contextlib
import math
import os
import subprocess
import sys

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import (
    MMCV_ROI_INPUTS,
    REPO,
    TOL,
    assert_same_fwd_bwd,
    capture_cuda_graph,
    deterministic_algorithms,
    invalid_batch_index_inputs,
    random_rois,
    requires_torchvision,
    strict_index_check,
    with_batch_index,
)
from roi_align_reference import max_mode_margin, roi_align_ref, roi_align_ref_grad

import mmops

op = torch.ops.mmops.roi_align

LOW_TOL = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}
# (N, C, H, W) and output size used together
CASES = [((1, 1, 5, 5), (2, 2)), ((2, 3, 7, 12), (3, 4)), ((3, 5, 20, 9), (7, 5))]


def run(x, rois, out_size, scale, sr, mode, aligned):
    return op(x, rois, list(out_size), scale, sr, mode, aligned)


def grad_of(x, rois, grad_out, *args):
    x = x.detach().requires_grad_(True)
    out = run(x, rois, *args)
    (g,) = torch.autograd.grad(out, x, grad_out)
    return g


def fwd_bwd(x, rois, go, *args):
    x = x.detach().requires_grad_(True)
    out = op(x, rois, *args)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


# --------------------------------------------------------------------------- conformance


def _data(seed=0, N=2, C=3, H=8, W=10, K=7, dtype=torch.float32, device="cpu", scale=1.0):
    torch.manual_seed(seed)
    x = torch.randn(N, C, H, W, dtype=dtype)
    rois = random_rois(K, N, H, W, dtype=dtype, spatial_scale=scale) if K else torch.zeros(0, 5, dtype=dtype)
    return x.to(device), rois.to(device)


def _sample(shape, K, options, other_shape=None, seed=13):
    """sample(device, dtype, size): (N, C, H, W) and K rois (other_shape for size 1)."""

    def make(device, dtype, size):
        (N, C, H, W), k = (shape, K) if size == 0 else other_shape
        return Sample((*_data(seed + size, N, C, H, W, k, dtype, device, options[1]), *options))

    return make


def _empty(mode):
    def make(device, dtype):
        f = dict(dtype=dtype, device=device)
        return [
            Sample(
                (torch.randn(2, 3, 6, 7, **f), torch.zeros(0, 5, **f), [2, 3], 1.0, 2, mode, True),
                out_shapes=[(0, 3, 2, 3)],
            ),  # no rois
            Sample(
                (torch.randn(2, 0, 6, 7, **f), random_rois(4, 2, 6, 7, **f), [2, 3], 1.0, 2, mode, True),
                out_shapes=[(4, 0, 2, 3)],
            ),  # no channels
            Sample(
                (torch.randn(0, 3, 5, 5, **f), torch.zeros(0, 5, **f), [2, 3], 1.0, 0, mode, True),
                out_shapes=[(0, 3, 2, 3)],
            ),  # empty batch and no rois
        ]

    return make


def _cuda_samples(modes):
    """CUDA == CPU: every mode, aligned or not, sampling ratio, scale and size; then odd
    channel counts (channel chunks of 32 / 64 with a partial last one, the scalar path
    of odd 16-bit counts). 16-bit argmax near-ties may pick another sample: max-mode
    gradients only with one sample per bin."""

    def make(dtype):
        low = dtype in (torch.float16, torch.bfloat16)
        torch.manual_seed(0)
        for mode in modes:
            for aligned in (True, False):
                for sr in (0, 1, 2, 3):
                    for scale in (1.0, 0.5, 0.25):
                        for (N, C, H, W), out_size in CASES:
                            x = torch.randn(N, C, H, W).to(dtype)
                            rois = random_rois(12, N, H, W, dtype=dtype, spatial_scale=scale)
                            yield Sample(
                                (x, rois, list(out_size), scale, sr, mode, aligned),
                                grads=not low or mode == "avg" or sr == 1,
                            )
        torch.manual_seed(16)
        for channels in (1, 3, 33, 65):
            x = torch.randn(2, channels, 9, 11).to(dtype)
            rois = random_rois(7, 2, 9, 11).to(dtype)
            for mode in modes:
                yield Sample((x, rois, [3, 2], 1.0, 0, mode, True), grads=not low or mode == "avg")

    return make


class _Net(torch.nn.Module):
    """roi_align in a model: RoIAlign modules, the op on computed inputs, in both modes."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.RoIAlign((3, 2), 0.5, 2, "avg", True)
        self.avg = mmops.RoIAlign((2, 3), 0.5, 2, "avg", False)
        self.max = mmops.RoIAlign((2, 3), 0.5, 2, "max", False)

    def forward(self, x: torch.Tensor, rois: torch.Tensor):
        y = torch.ops.mmops.roi_align(x * 1.5 - 0.25, rois, [3, 2], 0.5, 2, "max", False)
        z = torch.ops.mmops.roi_align(x, rois, [3, 2], 0.5, 0, "avg", True)
        computed = (y.sin() + 2 * z).sum(dim=1)
        net = self.pool(x * 2.0, rois) + torch.ops.mmops.roi_align(x, rois, [3, 2], 0.5, 0, "max", False).relu()
        quarter = torch.ops.mmops.roi_align(x, rois, [2, 2], 0.25, 0, "avg", False) * 2 + torch.ops.mmops.roi_align(
            x, rois, [2, 2], 0.25, 2, "max", True
        )
        return computed, net, quarter, self.avg(x, rois), self.max(x, rois)


def _helpers(sample):
    """The forward helper, then the backward helper on its argmax."""
    x, rois, out_size, *options = sample.args
    fwd, bwd = torch.ops.mmops._roi_align_forward, torch.ops.mmops._roi_align_backward
    out, argmax = fwd(*sample.args)
    # no output_size: from grad_output
    return [(fwd, sample.args), (bwd, (torch.randn_like(out), rois, argmax, list(x.shape), *options))]


_BATCH_INDEX = {
    f"batch_index_{v}": BadInput(lambda x, r, *o, v=v: (x, with_batch_index(r, 2, v), *o), "batch index")
    for v in (-1.0, 2.0, 7.0, math.nan)
}


BAD_INPUTS = {
    "input_3d": BadInput(lambda x, r, *o: (x[0], r, *o), "input"),
    "input_5d": BadInput(lambda x, r, *o: (x[None], r, *o), "input"),
    "rois_1d": BadInput(lambda x, r, *o: (x, r[0], *o), "rois"),
    "rois_3d": BadInput(lambda x, r, *o: (x, r[None], *o), "rois"),
    "rois_4_cols": BadInput(lambda x, r, *o: (x, r[:, :4], *o), "rois"),
    "rois_6_cols": BadInput(lambda x, r, *o: (x, torch.cat([r, r[:, :1]], 1), *o), "rois"),
    "rois_dtype": BadInput(lambda x, r, *o: (x, r.double(), *o), "rois"),
    "int_input": BadInput(lambda x, r, *o: (x.int(), r.int(), *o), "input"),
    "int_input_float_rois": BadInput(lambda x, r, *o: (x.long(), r, *o), "input"),
    "output_h_zero": BadInput(lambda x, r, s, *o: (x, r, [0, 2], *o), "output_size"),
    "output_w_negative": BadInput(lambda x, r, s, *o: (x, r, [2, -1], *o), "output_size"),
    "sampling_ratio_negative": BadInput(lambda x, r, s, sc, sr, *o: (x, r, s, sc, -1, *o), "sampling_ratio"),
    "pool_mode": BadInput(lambda x, r, s, sc, sr, m, a: (x, r, s, sc, sr, "sum", a), "pool_mode"),
    "pool_mode_case": BadInput(lambda x, r, s, sc, sr, m, a: (x, r, s, sc, sr, "AVG", a), "pool_mode"),
    "spatial_scale_zero": BadInput(lambda x, r, s, sc, *o: (x, r, s, 0.0, *o), "spatial_scale"),
    "spatial_scale_negative": BadInput(lambda x, r, s, sc, *o: (x, r, s, -0.5, *o), "spatial_scale"),
    "spatial_scale_inf": BadInput(lambda x, r, s, sc, *o: (x, r, s, math.inf, *o), "spatial_scale"),
    "spatial_scale_nan": BadInput(lambda x, r, s, sc, *o: (x, r, s, math.nan, *o), "spatial_scale"),
    "rois_on_cpu": BadInput(lambda x, r, *o: (x.cuda(), r, *o), "(?i)rois|device", cuda=True),
    "input_on_cpu": BadInput(lambda x, r, *o: (x, r.cuda(), *o), "(?i)rois|device|input", cuda=True),
    **_BATCH_INDEX,
}

CONFORMANCE = [
    ConformanceCase(
        "roi_align_avg_aligned",
        op,
        _sample((2, 3, 10, 12), 6, ([2, 3], 0.5, 2, "avg", True), ((3, 4, 14, 9), 9)),
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty("avg"),
        bad_inputs=BAD_INPUTS,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples(["avg"]),
        cpu_float32_reference=True,
        script_grad_tol=dict(rtol=1e-6, atol=1e-6),
    ),
    ConformanceCase(
        "roi_align_max_unaligned_adaptive",
        op,
        _sample((1, 2, 7, 7), 4, ([3, 3], 1.0, 0, "max", False)),
        dtype=torch.float64,
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty("max"),
        bad_inputs=_BATCH_INDEX,
        helpers=_helpers,
        cuda_samples=_cuda_samples(["max"]),
        cpu_float32_reference=True,
    ),
    ConformanceCase(
        "roi_align_max_aligned",
        op,
        _sample((3, 4, 6, 11), 6, ([2, 2], 0.25, 1, "max", True)),
        dtypes=(),
        grad_args=(0,),
        helpers=_helpers,
    ),
]


class TestRoIAlignConformance(ConformanceSuite):
    cases = CONFORMANCE


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("case", CONFORMANCE, ids=lambda case: case.name)
def test_helper_ops_match_public_op(case, device):
    """_roi_align_forward and _roi_align_backward compute what the public op and its autograd do
    (on the case's sample and on no rois)."""
    no_rois = case.empty(device, case.dtype)[:1] if case.empty else []
    for sample in [case.sample(device, case.dtype, 0), *no_rois]:
        x, rois, *args = sample.args
        out, argmax = torch.ops.mmops._roi_align_forward(*sample.args)
        go = torch.randn_like(out)
        xg = x.detach().requires_grad_(True)
        ref = op(xg, rois, *args)
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
        (g_ref,) = torch.autograd.grad(ref, xg, go)
        g = torch.ops.mmops._roi_align_backward(go, rois, argmax, list(x.shape), *args[1:])
        assert g.shape == x.shape
        torch.testing.assert_close(g, g_ref, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- forward


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("spatial_scale", [1.0, 0.5, 0.25])
@pytest.mark.parametrize("sampling_ratio", [0, 1, 2, 3])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_forward_matches_reference(pool_mode, aligned, sampling_ratio, spatial_scale, dtype):
    torch.manual_seed(0)
    for (N, C, H, W), out_size in CASES:
        x = torch.randn(N, C, H, W, dtype=dtype)
        rois = random_rois(12, N, H, W, dtype=dtype, spatial_scale=spatial_scale)
        args = (out_size, spatial_scale, sampling_ratio, pool_mode, aligned)
        out = run(x, rois, *args)
        exp = roi_align_ref(x, rois, *args)
        assert exp.abs().sum() > 0
        assert out.dtype == dtype and out.shape == (12, C, *out_size)
        torch.testing.assert_close(out, exp.to(dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sampling_ratio", [0, 1, 2, 3])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_backward_matches_reference(pool_mode, aligned, sampling_ratio, dtype):
    torch.manual_seed(1)
    for spatial_scale in (1.0, 0.5, 0.25):
        for (N, C, H, W), out_size in CASES:
            x = torch.randn(N, C, H, W, dtype=dtype)
            rois = random_rois(12, N, H, W, dtype=dtype, spatial_scale=spatial_scale)
            args = (out_size, spatial_scale, sampling_ratio, pool_mode, aligned)
            go = torch.randn(12, C, *out_size, dtype=dtype)
            g = grad_of(x, rois, go, *args)
            exp = roi_align_ref_grad(
                x,
                rois,
                go,
                output_size=out_size,
                spatial_scale=spatial_scale,
                sampling_ratio=sampling_ratio,
                pool_mode=pool_mode,
                aligned=aligned,
            )
            assert exp.abs().sum() > 0
            assert g.dtype == dtype and g.shape == x.shape
            torch.testing.assert_close(g, exp.to(dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_low_precision_matches_reference(pool_mode, aligned, dtype):
    torch.manual_seed(2)
    for sampling_ratio in (0, 2):
        for (N, C, H, W), out_size in CASES:
            x = torch.randn(N, C, H, W).to(dtype)
            rois = random_rois(12, N, H, W, dtype=dtype, spatial_scale=0.5)
            args = (out_size, 0.5, sampling_ratio, pool_mode, aligned)
            out = run(x, rois, *args)
            assert out.dtype == dtype and out.shape == (12, C, *out_size)
            torch.testing.assert_close(out.double(), roi_align_ref(x, rois, *args), **TOL[dtype])
            if pool_mode == "max":
                continue  # near-ties may pick another sample: see the test below
            go = torch.randn(12, C, *out_size).to(dtype)
            g = grad_of(x, rois, go, *args)
            exp = roi_align_ref_grad(
                x,
                rois,
                go,
                output_size=out_size,
                spatial_scale=0.5,
                sampling_ratio=sampling_ratio,
                pool_mode=pool_mode,
                aligned=aligned,
            )
            assert g.dtype == dtype
            torch.testing.assert_close(g.double(), exp, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_max_backward_single_sample(dtype):
    # sampling_ratio=1: one sample per bin, so no argmax ambiguity in low precision
    torch.manual_seed(3)
    x = torch.randn(2, 3, 9, 11).to(dtype)
    rois = random_rois(10, 2, 9, 11, dtype=dtype)
    go = torch.randn(10, 3, 3, 3).to(dtype)
    args = ((3, 3), 1.0, 1, "max", True)
    g = grad_of(x, rois, go, *args)
    exp = roi_align_ref_grad(
        x, rois, go, output_size=(3, 3), spatial_scale=1.0, sampling_ratio=1, pool_mode="max", aligned=True
    )
    torch.testing.assert_close(g.double(), exp, **TOL[dtype])


# --------------------------------------------------------------------------- known vectors

# mmcv tests/test_ops/test_roi_align.py: output 2x2, spatial_scale 1, sampling_ratio 2,
# avg, aligned=True; gradients are of output.sum().
MMCV_EXPECTED = [  # (output, input gradient) of each of MMCV_ROI_INPUTS
    ([[[[1.0, 1.25], [1.5, 1.75]]]], [[[[3.0625, 0.4375], [0.4375, 0.0625]]]]),
    (
        [[[[1.0, 1.25], [1.5, 1.75]], [[4.0, 3.75], [3.5, 3.25]]]],
        [[[[3.0625, 0.4375], [0.4375, 0.0625]], [[3.0625, 0.4375], [0.4375, 0.0625]]]],
    ),
    (
        [[[[1.9375, 4.75], [7.5625, 10.375]]]],
        [
            [
                [
                    [0.47265625, 0.42968750, 0.42968750, 0.04296875],
                    [0.42968750, 0.39062500, 0.39062500, 0.03906250],
                    [0.42968750, 0.39062500, 0.39062500, 0.03906250],
                    [0.04296875, 0.03906250, 0.03906250, 0.00390625],
                ]
            ]
        ],
    ),
]
MMCV_VECTORS = [(inp, roi, out, grad) for (inp, roi), (out, grad) in zip(MMCV_ROI_INPUTS, MMCV_EXPECTED)]

# Hand-derived on f(y, x) = 1 + x + 2y = [[1, 2], [3, 4]] (bilinear is exact on it).
# (input, roi, output_size, sampling_ratio, pool_mode, aligned, output, grad of output.sum())
HAND_VECTORS = [
    # not aligned: one sample at (0.5, 0.5)
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 0.0, 0.0, 1.0, 1.0]],
        (1, 1),
        1,
        "avg",
        False,
        [[[[2.5]]]],
        [[[[0.25, 0.25], [0.25, 0.25]]]],
    ),
    # not aligned: samples at y, x in {0.25, 0.75}
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 0.0, 0.0, 1.0, 1.0]],
        (2, 2),
        1,
        "avg",
        False,
        [[[[1.75, 2.25], [2.75, 3.25]]]],
        [[[[1.0, 1.0], [1.0, 1.0]]]],
    ),
    # not aligned, max over 4 samples at {0.25, 0.75}^2: (0.75, 0.75) wins with 3.25
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 0.0, 0.0, 1.0, 1.0]],
        (1, 1),
        2,
        "max",
        False,
        [[[[3.25]]]],
        [[[[0.0625, 0.1875], [0.1875, 0.5625]]]],
    ),
    # not aligned: a zero-size roi is widened to 1 px
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 0.5, 0.5, 0.5, 0.5]],
        (1, 1),
        1,
        "avg",
        False,
        [[[[4.0]]]],
        [[[[0.0, 0.0], [0.0, 1.0]]]],
    ),
    # aligned, max: samples at -0.375 / -0.125 are clamped to 0 -> value 1 at (0, 0)
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 0.0, 0.0, 1.0, 1.0]],
        (2, 2),
        2,
        "max",
        True,
        [[[[1.0, 1.375], [1.75, 2.125]]]],
        [[[[2.640625, 0.609375], [0.609375, 0.140625]]]],
    ),
    # aligned, adaptive: zero-size roi has no samples -> 0, no gradient
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 1.0, 1.0, 1.0, 1.0]],
        (1, 1),
        0,
        "max",
        True,
        [[[[0.0]]]],
        [[[[0.0, 0.0], [0.0, 0.0]]]],
    ),
    # not aligned: a sample exactly at x = -1 is inside (clamped to 0) ...
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, -1.5, 0.0, -0.5, 1.0]],
        (1, 1),
        1,
        "avg",
        False,
        [[[[2.0]]]],
        [[[[0.5, 0.0], [0.5, 0.0]]]],
    ),
    # ... so is one exactly at x = W (clamped to W - 1) ...
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 1.5, 0.0, 2.5, 1.0]],
        (1, 1),
        1,
        "avg",
        False,
        [[[[3.0]]]],
        [[[[0.0, 0.5], [0.0, 0.5]]]],
    ),
    # ... and one exactly at y = H ...
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 0.0, 1.5, 1.0, 2.5]],
        (1, 1),
        1,
        "avg",
        False,
        [[[[3.5]]]],
        [[[[0.0, 0.0], [0.5, 0.5]]]],
    ),
    # ... but x = W + 0.0625 is outside
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 1.5, 0.0, 2.625, 1.0]],
        (1, 1),
        1,
        "avg",
        False,
        [[[[0.0]]]],
        [[[[0.0, 0.0], [0.0, 0.0]]]],
    ),
    # max, all-zero input: first maximum wins; here the first sample (0.25, 0.5) is inside
    (
        [[[[0.0, 0.0], [0.0, 0.0]]]],
        [[0.0, 0.0, 0.5, 4.0, 1.5]],
        (1, 1),
        2,
        "max",
        True,
        [[[[0.0]]]],
        [[[[0.375, 0.375], [0.125, 0.125]]]],
    ),
    # ... and here the first sample (x = -2.5) is outside: it wins, no gradient
    (
        [[[[0.0, 0.0], [0.0, 0.0]]]],
        [[0.0, -3.0, 0.5, 1.0, 1.5]],
        (1, 1),
        2,
        "max",
        True,
        [[[[0.0]]]],
        [[[[0.0, 0.0], [0.0, 0.0]]]],
    ),
    # aligned, max: negative values; out-of-range sample (value 0) wins the max
    (
        [[[[-1.0, -2.0], [-3.0, -4.0]]]],
        [[0.0, -3.0, -1.2, 1.0, 1.0]],
        (1, 1),
        2,
        "max",
        True,
        [[[[0.0]]]],
        [[[[0.0, 0.0], [0.0, 0.0]]]],
    ),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(MMCV_VECTORS)))
def test_mmcv_known_vectors(case, dtype):
    inp, roi, out, grad = MMCV_VECTORS[case]
    x = torch.tensor(inp, dtype=dtype, requires_grad=True)
    rois = torch.tensor(roi, dtype=dtype)
    y = op(x, rois, [2, 2], 1.0, 2, "avg", True)
    y.sum().backward()
    torch.testing.assert_close(y, torch.tensor(out, dtype=dtype), **TOL[dtype])
    torch.testing.assert_close(x.grad, torch.tensor(grad, dtype=dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(HAND_VECTORS)))
def test_hand_derived_vectors(case, dtype):
    inp, roi, out_size, sr, mode, aligned, out, grad = HAND_VECTORS[case]
    x = torch.tensor(inp, dtype=dtype, requires_grad=True)
    y = op(x, torch.tensor(roi, dtype=dtype), list(out_size), 1.0, sr, mode, aligned)
    y.sum().backward()
    torch.testing.assert_close(y, torch.tensor(out, dtype=dtype), **TOL[dtype])
    torch.testing.assert_close(x.grad, torch.tensor(grad, dtype=dtype), **TOL[dtype])


def test_reference_reproduces_known_vectors():
    """Sanity check of the reference itself against the independent vectors."""
    for inp, roi, out, grad in MMCV_VECTORS:
        kw = dict(output_size=(2, 2), spatial_scale=1.0, sampling_ratio=2, pool_mode="avg", aligned=True)
        x, r = torch.tensor(inp, dtype=torch.float64), torch.tensor(roi)
        torch.testing.assert_close(roi_align_ref(x, r, **kw), torch.tensor(out, dtype=torch.float64))
        g = roi_align_ref_grad(x, r, torch.ones(1, x.shape[1], 2, 2), **kw)
        torch.testing.assert_close(g, torch.tensor(grad, dtype=torch.float64))
    for inp, roi, out_size, sr, mode, aligned, out, grad in HAND_VECTORS:
        kw = dict(output_size=out_size, spatial_scale=1.0, sampling_ratio=sr, pool_mode=mode, aligned=aligned)
        x, r = torch.tensor(inp, dtype=torch.float64), torch.tensor(roi)
        torch.testing.assert_close(roi_align_ref(x, r, **kw), torch.tensor(out, dtype=torch.float64))
        g = roi_align_ref_grad(x, r, torch.ones(1, 1, *out_size), **kw)
        torch.testing.assert_close(g, torch.tensor(grad, dtype=torch.float64))


@pytest.mark.parametrize("sampling_ratio", [0, 1, 2, 3])
@pytest.mark.parametrize("aligned", [True, False])
def test_linear_field_exact(aligned, sampling_ratio):
    """On f = a + b*x + c*y, a bin that lies inside [0, H-1] x [0, W-1] averages to
    f(bin centre); with b, c > 0 the max is at the bin's last sample."""
    H, W, scale = 9, 13, 0.5
    a, b, c = 0.3, 0.7, 1.9
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float64), torch.arange(W, dtype=torch.float64), indexing="ij")
    x = (a + b * xs + c * ys).expand(1, 2, H, W).contiguous()
    boxes = [(1.0, 1.5, 10.0, 7.0), (2.25, 0.75, 3.5, 6.25), (0.6, 1.1, 12.4, 7.9)]
    off = 0.5 if aligned else 0.0
    # image coordinates such that feature coords (v * scale - off) are the boxes above
    rois = torch.tensor([[0.0] + [(v + off) / scale for v in box] for box in boxes], dtype=torch.float64)
    oh, ow = 3, 4
    f = lambda yy, xx: a + b * xx + c * yy  # noqa: E731
    exp_avg, exp_max = torch.zeros(3, 2, oh, ow, dtype=torch.float64), torch.zeros(3, 2, oh, ow, dtype=torch.float64)
    for k, (x1, y1, x2, y2) in enumerate(boxes):
        bh, bw = (y2 - y1) / oh, (x2 - x1) / ow
        gh = sampling_ratio or math.ceil(bh)
        gw = sampling_ratio or math.ceil(bw)
        for ph in range(oh):
            for pw in range(ow):
                exp_avg[k, :, ph, pw] = f(y1 + (ph + 0.5) * bh, x1 + (pw + 0.5) * bw)
                exp_max[k, :, ph, pw] = f(y1 + ph * bh + (gh - 0.5) * bh / gh, x1 + pw * bw + (gw - 0.5) * bw / gw)
    for mode, exp in (("avg", exp_avg), ("max", exp_max)):
        for dtype in (torch.float32, torch.float64):
            out = op(x.to(dtype), rois.to(dtype), [oh, ow], scale, sampling_ratio, mode, aligned)
            torch.testing.assert_close(out, exp.to(dtype), **TOL[dtype])


# --------------------------------------------------------------------------- gradcheck


@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("aligned", [True, False])
def test_gradcheck_avg(aligned, sampling_ratio):
    torch.manual_seed(4)
    x = torch.randn(2, 2, 6, 7, dtype=torch.float64, requires_grad=True)
    rois = random_rois(6, 2, 6, 7, dtype=torch.float64, spatial_scale=0.5)
    assert torch.autograd.gradcheck(
        lambda t: op(t, rois, [2, 3], 0.5, sampling_ratio, "avg", aligned), (x,), check_batched_grad=False
    )


@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("aligned", [True, False])
def test_gradcheck_max(aligned, sampling_ratio):
    torch.manual_seed(5)
    H, W = 7, 8
    # well separated values, boxes strictly inside the map (no clamped duplicates)
    x = torch.randperm(2 * H * W, dtype=torch.float64).reshape(1, 2, H, W) / 4.0
    x.requires_grad_(True)
    rois = torch.tensor(
        [[0, 0.9, 1.2, 6.3, 5.4], [0, 2.1, 0.8, 4.2, 3.3], [0, 1.6, 1.1, 5.9, 4.1]], dtype=torch.float64
    )
    args = ([2, 2], 1.0, sampling_ratio, "max", aligned)
    assert max_mode_margin(x, rois, (2, 2), 1.0, sampling_ratio, aligned) > 1e-3
    assert torch.autograd.gradcheck(lambda t: op(t, rois, *args), (x,), check_batched_grad=False)


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_double_backward_raises(pool_mode):
    torch.manual_seed(6)
    x = torch.randn(1, 2, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = random_rois(4, 1, 6, 6, dtype=torch.float64)
    out = op(x, rois, [2, 2], 1.0, 2, pool_mode, True)
    go = torch.randn_like(out, requires_grad=True)
    # mmops refuses already in the create_graph backward; either step may raise
    with pytest.raises(RuntimeError, match="double backward"):
        (g,) = torch.autograd.grad(out, x, go, create_graph=True)
        torch.autograd.grad(g.sum(), (x, go))
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.gradgradcheck(lambda t: op(t, rois, [2, 2], 1.0, 2, pool_mode, True), (x,))
    # create_graph with a constant grad_output is fine (nothing to differentiate twice)
    out = op(x, rois, [2, 2], 1.0, 2, pool_mode, True)
    (g,) = torch.autograd.grad(out, x, go.detach(), create_graph=True)
    exp = roi_align_ref_grad(x, rois, go, output_size=(2, 2), sampling_ratio=2, pool_mode=pool_mode)
    torch.testing.assert_close(g, exp, **TOL[torch.float64])


# --------------------------------------------------------------------------- torchvision


@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sampling_ratio", [0, 1, 2, 3])
@pytest.mark.parametrize("aligned", [True, False])
def test_matches_torchvision(aligned, sampling_ratio, dtype):
    import torchvision

    torch.manual_seed(7)
    for scale in (1.0, 0.25):
        for (N, C, H, W), out_size in CASES:
            x = torch.randn(N, C, H, W, dtype=dtype)
            # torchvision's CPU kernel cannot take reversed boxes in adaptive mode
            rois = random_rois(12, N, H, W, dtype=dtype, spatial_scale=scale, ordered=True)
            go = torch.randn(12, C, *out_size, dtype=dtype)
            xa = x.clone().requires_grad_(True)
            xb = x.clone().requires_grad_(True)
            out = op(xa, rois, list(out_size), scale, sampling_ratio, "avg", aligned)
            exp = torchvision.ops.roi_align(xb, rois, out_size, scale, sampling_ratio, aligned)
            assert_same_fwd_bwd(out, exp, xa, xb, go, TOL[dtype], TOL[dtype])


# --------------------------------------------------------------------------- special inputs


@pytest.mark.parametrize("shape", [(2, 3, 0, 5), (2, 3, 4, 0)])
def test_empty_feature_map_gives_zeros(shape):
    x = torch.randn(*shape, requires_grad=True)
    rois = random_rois(4, 2, 4, 5)
    for mode in ("avg", "max"):
        out = op(x, rois, [2, 2], 1.0, 0, mode, True)
        assert torch.equal(out, torch.zeros(4, 3, 2, 2))
        (g,) = torch.autograd.grad(out.sum(), x)
        assert g.shape == shape


def test_rois_requiring_grad_get_no_gradient():
    torch.manual_seed(14)
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = random_rois(5, 2, 6, 6, dtype=torch.float64).requires_grad_(True)
    out = op(x, rois, [2, 2], 1.0, 2, "avg", True)
    go = torch.randn_like(out)
    out.backward(go)
    assert rois.grad is None
    torch.testing.assert_close(x.grad, roi_align_ref_grad(x, rois, go, output_size=(2, 2), sampling_ratio=2))


def _noncontiguous_inputs(x):
    N, C, H, W = x.shape
    t = torch.empty(N, C, W, H).transpose(2, 3)
    t.copy_(x)
    s = torch.empty(N, 2 * C, H, 3 * W)[:, ::2, :, ::3]
    s.copy_(x)
    e = x[:1].expand(N, C, H, W)
    return {"transposed": t, "sliced": s, "channels_last": x.to(memory_format=torch.channels_last), "expanded": e}


@pytest.mark.parametrize("layout", ["transposed", "sliced", "channels_last", "expanded"])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_noncontiguous_input(pool_mode, layout):
    torch.manual_seed(8)
    x = torch.randn(2, 3, 8, 10)
    xv = _noncontiguous_inputs(x)[layout]
    assert not xv.is_contiguous()
    x = xv.contiguous()
    rois = random_rois(9, 2, 8, 10, spatial_scale=0.5)
    rois_nc = torch.empty(5, 9).t()
    rois_nc.copy_(rois)
    assert not rois_nc.is_contiguous()
    go = torch.randn(9, 3, 3, 2)
    args = ([3, 2], 0.5, 2, pool_mode, False)
    for xi, ri in ((xv, rois), (x, rois_nc), (xv, rois_nc)):
        xa, xb = xi.detach().requires_grad_(True), x.detach().requires_grad_(True)
        out, exp = op(xa, ri, *args), op(xb, rois, *args)
        assert_same_fwd_bwd(out, exp, xa, xb, go, dict(rtol=0, atol=0), dict(rtol=1e-6, atol=1e-6))
    torch.testing.assert_close(
        exp.double(), roi_align_ref(x, rois, (3, 2), 0.5, 2, pool_mode, False), **TOL[torch.float32]
    )


def test_noncontiguous_grad_output():
    torch.manual_seed(9)
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    rois = random_rois(5, 1, 6, 6)
    out = op(x, rois, [3, 3], 1.0, 2, "avg", True)
    go = torch.randn(3, 3, 2, 5).permute(3, 2, 0, 1)
    assert not go.is_contiguous()
    (g,) = torch.autograd.grad(out, x, go)
    (g2,) = torch.autograd.grad(op(x, rois, [3, 3], 1.0, 2, "avg", True), x, go.contiguous())
    torch.testing.assert_close(g, g2, rtol=0, atol=0)


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_nonfinite_roi_coordinates_give_zeros(pool_mode):
    torch.manual_seed(10)
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64, requires_grad=True)
    rois = random_rois(10, 2, 8, 8, dtype=torch.float64)
    bad = [
        (0, 1, math.nan),
        (1, 2, math.nan),
        (2, 3, math.nan),
        (3, 4, math.nan),
        (4, 1, math.inf),
        (5, 4, -math.inf),
        (6, 3, math.inf),
    ]
    for row, col, v in bad:
        rois[row, col] = v
    out = op(x, rois, [2, 2], 1.0, 0, pool_mode, True)
    assert torch.equal(out[:7], torch.zeros_like(out[:7]))
    torch.testing.assert_close(out[7:], roi_align_ref(x, rois[7:], (2, 2), 1.0, 0, pool_mode, True))
    go = torch.randn_like(out)
    (g,) = torch.autograd.grad(out, x, go)
    torch.testing.assert_close(
        g, roi_align_ref_grad(x, rois[7:], go[7:], output_size=(2, 2), sampling_ratio=0, pool_mode=pool_mode)
    )
    assert torch.isfinite(g).all()


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_nan_in_input(pool_mode):
    x = torch.randn(1, 2, 10, 10, dtype=torch.float64)
    x[0, 0, 1, 1] = math.nan
    rois = torch.tensor([[0, 0.0, 0.0, 4.0, 4.0], [0, 6.0, 6.0, 9.5, 9.5]], dtype=torch.float64)
    out = op(x, rois, [2, 2], 1.0, 2, pool_mode, True)
    assert out.shape == (2, 2, 2, 2)
    # the second roi does not come near the NaN pixel
    torch.testing.assert_close(out[1], roi_align_ref(x, rois[1:], (2, 2), 1.0, 2, pool_mode, True)[0])
    assert torch.isfinite(out[:, 1]).all()


def test_huge_adaptive_roi_is_capped():
    # a 2000 px bin: the adaptive grid is capped at 512 samples per side
    torch.manual_seed(12)
    x = torch.randn(1, 2, 16, 16, dtype=torch.float64)
    rois = torch.tensor([[0, -1000.0, -1000.0, 1000.0, 1000.0]], dtype=torch.float64)
    for mode in ("avg", "max"):
        out = op(x, rois, [1, 1], 1.0, 0, mode, True)
        exp = roi_align_ref(x, rois, (1, 1), 1.0, 0, mode, True)
        assert exp.abs().min() > 0
        torch.testing.assert_close(out, exp)


def test_defaults():
    torch.manual_seed(11)
    x = torch.randn(2, 3, 7, 7, dtype=torch.float64)
    rois = random_rois(6, 2, 7, 7, dtype=torch.float64)
    out = op(x, rois, [3, 3])
    torch.testing.assert_close(out, op(x, rois, [3, 3], 1.0, 0, "avg", True), rtol=0, atol=0)
    torch.testing.assert_close(out, roi_align_ref(x, rois, (3, 3), 1.0, 0, "avg", True))
    kw = op(x, rois, output_size=[3, 3], spatial_scale=0.5, sampling_ratio=2, pool_mode="max", aligned=False)
    torch.testing.assert_close(kw, roi_align_ref(x, rois, (3, 3), 0.5, 2, "max", False))


# --------------------------------------------------------------------------- errors


def test_bad_batch_index_raises_in_helper_ops_on_cpu():
    x, rois = torch.randn(2, 3, 6, 6), random_rois(4, 2, 6, 6)
    rois[1, 0] = 5
    with pytest.raises(RuntimeError, match="batch index"):
        torch.ops.mmops._roi_align_forward(x, rois, [2, 2], 1.0, 0, "max", True)


def test_strict_index_check_toggle():
    before = mmops.strict_index_check()
    try:
        mmops.set_strict_index_check(True)
        assert mmops.strict_index_check() is True
        mmops.set_strict_index_check(False)
        assert mmops.strict_index_check() is False
    finally:
        mmops.set_strict_index_check(before)
    assert mmops.strict_index_check() == before


def test_strict_index_check_env_var():
    env = dict(os.environ, MMOPS_STRICT_INDEX_CHECK="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), os.path.join(REPO, "python")) if p)
    code = "import mmops; print(mmops.strict_index_check())"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "True"
    env["MMOPS_STRICT_INDEX_CHECK"] = "0"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "False"


# --------------------------------------------------------------------------- property test

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None

if given is not None:

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(
        n=st.integers(1, 3),
        c=st.integers(1, 3),
        h=st.integers(1, 9),
        w=st.integers(1, 9),
        oh=st.integers(1, 4),
        ow=st.integers(1, 4),
        k=st.integers(1, 6),
        scale=st.sampled_from([1.0, 0.5, 0.25, 0.125]),
        sr=st.integers(0, 4),
        mode=st.sampled_from(["avg", "max"]),
        aligned=st.booleans(),
        seed=st.integers(0, 2**16),
    )
    def test_property_matches_reference(n, c, h, w, oh, ow, k, scale, sr, mode, aligned, seed):
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(n, c, h, w, dtype=torch.float64, generator=gen)
        rois = random_rois(k, n, h, w, dtype=torch.float64, spatial_scale=scale, extra=False, generator=gen)
        go = torch.randn(k, c, oh, ow, dtype=torch.float64, generator=gen)
        args = ((oh, ow), scale, sr, mode, aligned)
        out = run(x, rois, *args)
        torch.testing.assert_close(out, roi_align_ref(x, rois, *args), **TOL[torch.float64])
        g = grad_of(x, rois, go, *args)
        exp = roi_align_ref_grad(
            x, rois, go, output_size=(oh, ow), spatial_scale=scale, sampling_ratio=sr, pool_mode=mode, aligned=aligned
        )
        torch.testing.assert_close(g, exp, **TOL[torch.float64])


# --------------------------------------------------------------------------- Python API

# --------------------------------------------------------------------------- functional


def test_functional_list_of_boxes_equals_rois():
    torch.manual_seed(1)
    boxes = [torch.rand(3, 4) * 8, torch.rand(0, 4), torch.rand(2, 4) * 8]
    x = torch.randn(3, 3, 8, 10)
    rois = torch.cat([torch.cat([torch.full((len(b), 1), float(i)), b], 1) for i, b in enumerate(boxes)])
    for mode in ("avg", "max"):
        out_list = mmops.roi_align(x, boxes, (3, 2), 0.5, 2, mode, False)
        out_rois = mmops.roi_align(x, rois, (3, 2), 0.5, 2, mode, False)
        assert out_list.shape == (5, 3, 3, 2)
        torch.testing.assert_close(out_list, out_rois, rtol=0, atol=0)
        torch.testing.assert_close(out_rois, op(x, rois, [3, 2], 0.5, 2, mode, False), rtol=0, atol=0)
        torch.testing.assert_close(
            out_list.double(), roi_align_ref(x, rois, (3, 2), 0.5, 2, mode, False), atol=1e-5, rtol=1e-5
        )


def test_functional_output_size_int_and_defaults():
    x, rois = _data(2)
    out = mmops.roi_align(x, rois, 3)
    assert out.shape == (7, 3, 3, 3)
    torch.testing.assert_close(out, mmops.roi_align(x, rois, (3, 3)), rtol=0, atol=0)
    torch.testing.assert_close(out, op(x, rois, [3, 3], 1.0, 0, "avg", True), rtol=0, atol=0)
    kw = mmops.roi_align(
        x, rois, output_size=[2, 4], spatial_scale=0.25, sampling_ratio=3, pool_mode="max", aligned=False
    )
    torch.testing.assert_close(kw, op(x, rois, [2, 4], 0.25, 3, "max", False), rtol=0, atol=0)


def test_functional_backward():
    x, _ = _data(3)
    x.requires_grad_(True)
    boxes = [torch.tensor([[1.0, 1.0, 6.0, 5.0]]), torch.tensor([[0.5, 2.0, 9.0, 7.5]])]
    out = mmops.roi_align(x, boxes, 2, 1.0, 2, "avg", True)
    go = torch.randn_like(out)
    out.backward(go)
    rois = torch.tensor([[0, 1.0, 1.0, 6.0, 5.0], [1, 0.5, 2.0, 9.0, 7.5]])
    exp = roi_align_ref_grad(x, rois, go, output_size=2, sampling_ratio=2)
    torch.testing.assert_close(x.grad.double(), exp, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- nn.Module


def test_module_matches_op_and_repr():
    x, rois = _data(4, scale=0.5)
    m = mmops.RoIAlign((2, 3), spatial_scale=0.5, sampling_ratio=2, pool_mode="max", aligned=False)
    torch.testing.assert_close(m(x, rois), op(x, rois, [2, 3], 0.5, 2, "max", False), rtol=0, atol=0)
    r = repr(m)
    assert r.startswith("RoIAlign(")
    for s in ("2", "3", "0.5", "max", "False"):
        assert s in r, (s, r)
    m_int = mmops.RoIAlign(4)
    out = m_int(x, rois)
    assert out.shape == (7, 3, 4, 4)
    torch.testing.assert_close(out, op(x, rois, [4, 4], 1.0, 0, "avg", True), rtol=0, atol=0)
    assert "avg" in repr(m_int) and "True" in repr(m_int)
    assert len(list(m.parameters())) == 0


def test_module_backward():
    x, rois = _data(5)
    x.requires_grad_(True)
    m = mmops.RoIAlign(3, 1.0, 0, "max", True)
    out = m(x, rois)
    go = torch.randn_like(out)
    out.backward(go)
    exp = roi_align_ref_grad(x, rois, go, output_size=3, pool_mode="max")
    torch.testing.assert_close(x.grad.double(), exp, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_matches_reference(pool_mode):
    torch.manual_seed(1)
    x = torch.randn(2, 4, 11, 13, dtype=torch.float64, device="cuda")
    rois = random_rois(20, 2, 11, 13, dtype=torch.float64, device="cuda", spatial_scale=0.5)
    out = op(x, rois, [3, 3], 0.5, 0, pool_mode, True)
    torch.testing.assert_close(
        out.cpu(), roi_align_ref(x.cpu(), rois, (3, 3), 0.5, 0, pool_mode, True), **TOL[torch.float64]
    )


@pytest.mark.cuda
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_invalid_batch_index_gives_zeros(pool_mode):
    with strict_index_check(False):
        _invalid_batch_index_gives_zeros(pool_mode)


def _invalid_batch_index_gives_zeros(pool_mode):
    x, rois, bad, go = invalid_batch_index_inputs(seed=2)
    out, g = fwd_bwd(x, rois, go, [2, 2], 1.0, 2, pool_mode, True)
    torch.cuda.synchronize()
    assert torch.equal(out[bad], torch.zeros_like(out[bad]))
    good = [i for i in range(8) if i not in bad]
    exp, gexp = fwd_bwd(x.cpu(), rois[good].cpu(), go[good].cpu(), [2, 2], 1.0, 2, pool_mode, True)
    torch.testing.assert_close(out[good].cpu(), exp, **TOL[torch.float32])
    torch.testing.assert_close(g.cpu(), gexp, **TOL[torch.float32])
    # only invalid rois: all zeros, zero gradient
    out, g = fwd_bwd(x, rois[bad], go[bad], [2, 2], 1.0, 2, pool_mode, True)
    assert torch.equal(out, torch.zeros_like(out)) and torch.equal(g, torch.zeros_like(g))


@pytest.mark.cuda
@pytest.mark.parametrize("batch_index", [-1.0, 2.0, math.nan])
def test_cuda_strict_index_check_raises(batch_index):
    x = torch.randn(2, 3, 8, 8, device="cuda")
    rois = random_rois(4, 2, 8, 8, device="cuda")
    rois[1, 0] = batch_index
    before = mmops.strict_index_check()
    with strict_index_check(True):
        assert mmops.strict_index_check() is True
        for mode in ("avg", "max"):
            with pytest.raises(RuntimeError, match="batch index"):
                op(x, rois, [2, 2], 1.0, 0, mode, True)
                torch.cuda.synchronize()
        # valid rois still work in strict mode
        rois[1, 0] = 1.0
        out = op(x, rois, [2, 2], 1.0, 0, "avg", True)
        torch.testing.assert_close(
            out.cpu(), op(x.cpu(), rois.cpu(), [2, 2], 1.0, 0, "avg", True), **TOL[torch.float32]
        )
    assert mmops.strict_index_check() == before


@pytest.mark.cuda
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_noncontiguous(pool_mode):
    torch.manual_seed(3)
    x = torch.randn(2, 3, 8, 10, device="cuda", requires_grad=True)
    xc = x.detach()
    rois = random_rois(9, 2, 8, 10, device="cuda", spatial_scale=0.5)
    rois_nc = torch.empty(5, 9, device="cuda").t()
    rois_nc.copy_(rois)
    go = torch.randn(9, 3, 3, 2, device="cuda")
    args = ([3, 2], 0.5, 2, pool_mode, False)
    exp, gexp = fwd_bwd(xc, rois, go, *args)
    sliced = torch.empty(2, 6, 8, 20, device="cuda")[:, ::2, :, ::2]
    sliced.copy_(xc)
    for xv in (xc.to(memory_format=torch.channels_last), xc.transpose(2, 3).contiguous().transpose(2, 3), sliced):
        assert not xv.is_contiguous() and torch.equal(xv, xc)
        out, g = fwd_bwd(xv, rois_nc, go.permute(3, 2, 1, 0).contiguous().permute(3, 2, 1, 0), *args)
        torch.testing.assert_close(out, exp, rtol=0, atol=0)
        torch.testing.assert_close(g, gexp, rtol=1e-6, atol=1e-6)


@pytest.mark.cuda
def test_cuda_nonfinite_rois():
    x = torch.randn(1, 2, 8, 8, device="cuda", requires_grad=True)
    rois = torch.tensor([[0, math.nan, 1, 5, 5], [0, 1, math.inf, 5, 5], [0, 1, 1, 5, -math.inf]], device="cuda")
    for mode in ("avg", "max"):
        out = op(x, rois, [2, 2], 1.0, 0, mode, True)
        assert torch.equal(out, torch.zeros_like(out))
        (g,) = torch.autograd.grad(out.sum(), x)
        assert torch.equal(g, torch.zeros_like(g))


@pytest.mark.cuda
@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("aligned", [True, False])
def test_cuda_matches_torchvision(aligned, dtype):
    import torchvision

    torch.manual_seed(4)
    for sampling_ratio in (0, 1, 2, 3):
        x = torch.randn(2, 3, 12, 9, dtype=dtype, device="cuda")
        rois = random_rois(15, 2, 12, 9, dtype=dtype, device="cuda", spatial_scale=0.5, ordered=True)
        go = torch.randn(15, 3, 3, 3, dtype=dtype, device="cuda")
        out, g = fwd_bwd(x, rois, go, [3, 3], 0.5, sampling_ratio, "avg", aligned)
        xt = x.clone().requires_grad_(True)
        exp = torchvision.ops.roi_align(xt, rois, (3, 3), 0.5, sampling_ratio, aligned)
        (gexp,) = torch.autograd.grad(exp, xt, go)
        torch.testing.assert_close(out, exp, **TOL[dtype])
        torch.testing.assert_close(g, gexp, **TOL[dtype])


@pytest.mark.cuda
@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_graph_capture(pool_mode, strict):
    # strict mode skips its (synchronising) check while a graph is captured
    with strict_index_check(strict):
        _graph_capture(pool_mode)


def _graph_capture(pool_mode):
    torch.manual_seed(5)
    x = torch.randn(2, 4, 16, 16, device="cuda")
    rois = random_rois(10, 2, 16, 16, device="cuda", spatial_scale=0.5)
    args = ([3, 3], 0.5, 2, pool_mode, True)
    graph, static_out = capture_cuda_graph(lambda: op(x, rois, *args))
    for seed in (6, 7):
        torch.manual_seed(seed)
        x.copy_(torch.randn_like(x))
        rois.copy_(random_rois(10, 2, 16, 16, device="cuda", spatial_scale=0.5))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_out, op(x, rois, *args), rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_large(pool_mode, sampling_ratio):
    torch.manual_seed(8)
    # float64 for max mode so that CPU and GPU rounding cannot flip an argmax
    dtype = torch.float32 if pool_mode == "avg" else torch.float64
    x = torch.randn(2, 256, 64, 64, dtype=dtype)
    # rois in image coordinates of a 256x256 image, feature stride 4
    rois = random_rois(512, 2, 64, 64, dtype=dtype, spatial_scale=0.25, extra=False)
    go = torch.randn(512, 256, 7, 7, dtype=dtype)
    args = ([7, 7], 0.25, sampling_ratio, pool_mode, True)
    out, g = fwd_bwd(x.cuda(), rois.cuda(), go.cuda(), *args)
    exp, gexp = fwd_bwd(x, rois, go, *args)
    # fp32 sample coordinates reach 64 here (ulp 8e-6) and CPU and GPU contract
    # multiply-adds differently, so values differ by a few 1e-5 (seen: 2e-5).
    torch.testing.assert_close(out.cpu(), exp, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(g.cpu(), gexp, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_deterministic_backward_is_bitwise_repeatable(pool_mode, dtype):
    torch.manual_seed(11)
    # many overlapping rois on a small map: lots of adds land on the same values
    x = torch.randn(2, 70, 24, 24, device="cuda").to(dtype)
    rois = random_rois(300, 2, 24, 24, device="cuda", extra=False).to(dtype)
    go = torch.randn(300, 70, 5, 5, device="cuda").to(dtype)
    args = ([5, 5], 1.0, 0, pool_mode, True)
    with deterministic_algorithms():
        grads = [fwd_bwd(x, rois, go, *args)[1] for _ in range(3)]
    for g in grads[1:]:
        assert torch.equal(g, grads[0])
    _, default = fwd_bwd(x, rois, go, *args)  # float atomics: equal up to rounding
    tol = TOL[dtype] if dtype in (torch.float32, torch.float64) else LOW_TOL[dtype]
    torch.testing.assert_close(grads[0].double(), default.double(), **tol)
    if dtype == torch.float64:
        _, cpu = fwd_bwd(x.cpu(), rois.cpu(), go.cpu(), *args)
        torch.testing.assert_close(grads[0].cpu(), cpu, rtol=1e-10, atol=1e-10)


@pytest.mark.cuda
@pytest.mark.parametrize("deterministic", [False, True])
def test_cuda_backward_nonfinite_grad_stays_local(deterministic):
    # inf in one bin of one channel reaches that bin's taps only (as on CPU)
    torch.manual_seed(15)
    x = torch.randn(1, 3, 8, 8)
    rois = torch.tensor([[0, 0.5, 0.5, 3.5, 3.5], [0, 4.0, 4.0, 7.5, 7.5]])
    go = torch.randn(2, 3, 2, 2)
    go[0, 1, 0, 0] = math.inf
    ctx = deterministic_algorithms() if deterministic else contextlib.nullcontext()
    with ctx:
        _, g = fwd_bwd(x.cuda(), rois.cuda(), go.cuda(), [2, 2], 1.0, 2, "avg", True)
    _, expected = fwd_bwd(x, rois, go, [2, 2], 1.0, 2, "avg", True)
    finite = torch.isfinite(expected)
    assert not finite[0, 1].all() and finite[0, 0].all() and finite[0, 2].all()
    assert torch.equal(torch.isfinite(g).cpu(), finite)
    torch.testing.assert_close(g.cpu()[finite], expected[finite], rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_graph_capture_forward_and_backward(pool_mode, deterministic):
    torch.manual_seed(12)
    x = torch.randn(2, 8, 16, 16, device="cuda", requires_grad=True)
    rois = random_rois(10, 2, 16, 16, device="cuda", spatial_scale=0.5, extra=False)
    go = torch.randn(10, 8, 3, 3, device="cuda")
    args = ([3, 3], 0.5, 2, pool_mode, True)

    def step():
        out = op(x, rois, *args)
        (g,) = torch.autograd.grad(out, x, go)
        return out, g

    ctx = deterministic_algorithms() if deterministic else contextlib.nullcontext()
    with ctx:
        graph, (static_out, static_grad) = capture_cuda_graph(step)
        for seed in (13, 14):
            torch.manual_seed(seed)
            with torch.no_grad():
                x.copy_(torch.randn_like(x))
                rois.copy_(random_rois(10, 2, 16, 16, device="cuda", spatial_scale=0.5, extra=False))
                go.copy_(torch.randn_like(go))
            graph.replay()
            torch.cuda.synchronize()
            out, g = step()
            torch.testing.assert_close(static_out, out, rtol=0, atol=0)
            torch.testing.assert_close(static_grad, g, rtol=1e-6, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_channels_last_equals_contiguous(pool_mode, dtype):
    torch.manual_seed(15)
    x = torch.randn(2, 96, 20, 28, device="cuda").to(dtype)
    rois = random_rois(40, 2, 20, 28, device="cuda", spatial_scale=0.5).to(dtype)
    go = torch.randn(40, 96, 7, 7, device="cuda").to(dtype)
    args = ([7, 7], 0.5, 2, pool_mode, True)
    out, g = fwd_bwd(x, rois, go, *args)
    out_cl, g_cl = fwd_bwd(x.contiguous(memory_format=torch.channels_last), rois, go, *args)
    assert torch.equal(out, out_cl)
    # the float atomics add in another order: rounding differs, in the last bit of 16-bit types
    tol = TOL[dtype] if dtype == torch.float32 else LOW_TOL[dtype]
    torch.testing.assert_close(g, g_cl, **tol)


# ---- hardening (issue 11): bounded work, no narrowing, our errors, non-finite rois ----

_HX = torch.randn(1, 2, 6, 6, dtype=torch.float64)
_HROIS = torch.tensor([[0, 0.5, 0.5, 4.5, 4.5]], dtype=torch.float64)


def _bwd_helper(sampling_ratio=2, input_shape=(1, 2, 6, 6), pool_mode="avg", grad=None):
    g = torch.ones(1, 2, 2, 2, dtype=torch.float64) if grad is None else grad
    argmax = torch.zeros(g.shape, dtype=torch.int32)
    return torch.ops.mmops._roi_align_backward(
        g, _HROIS, argmax, list(input_shape), 1.0, sampling_ratio, pool_mode, True
    )


@pytest.mark.parametrize("sampling_ratio", [513, 10000, 46341, 2**31, 2**32 + 1, 2**62])
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_sampling_ratio_bounded_and_not_narrowed(sampling_ratio, device):
    x, rois = _HX.to(device), _HROIS.to(device)
    with pytest.raises(RuntimeError, match="sampling_ratio must be at most 512"):
        op(x, rois, [2, 2], 1.0, sampling_ratio, "avg", True)
    with pytest.raises(RuntimeError, match="sampling_ratio must be at most 512"):
        torch.ops.mmops._roi_align_forward(x, rois, [2, 2], 1.0, sampling_ratio, "max", True)
    with pytest.raises(RuntimeError, match="sampling_ratio must be at most 512"):
        _bwd_helper(sampling_ratio)


def test_sampling_ratio_at_bound_matches_reference():
    # 512 x 512 samples per bin: the bound itself works and equals the float64 reference.
    out = op(_HX, _HROIS, [1, 1], 1.0, 512, "avg", True)
    ref = roi_align_ref(_HX, _HROIS, (1, 1), 1.0, 512, "avg", True)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("output_size", [[4097, 2], [2, 4097], [2**31 + 2, 2], [2**32 + 1, 1], [2**62, 2**62]])
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_huge_output_size_gives_our_error(output_size, device):
    with pytest.raises(RuntimeError, match="output_size values must be at most 4096"):
        op(_HX.to(device), _HROIS.to(device), output_size, 1.0, 2, "avg", True)


def test_output_numel_overflow_gives_our_error():
    # Meta tensors of any size cost nothing: K * C * out_h * out_w would wrap around int64.
    x = torch.empty(1, 2**40, 0, 0, device="meta")
    rois = torch.empty(2**40, 5, device="meta")
    with pytest.raises(RuntimeError, match=r"output_size too large"):
        op(x, rois, [4096, 4096], 1.0, 2, "avg", True)


def test_grad_output_side_bounded():
    g = torch.zeros(1, 2, 1, 4097, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="out_h and out_w of grad_output to be at most 4096"):
        _bwd_helper(grad=g)


@pytest.mark.parametrize(
    "input_shape",
    [
        (1, 2, -6, 6),
        (-1, 2, 6, 6),
        (1, 2, 6, -1),
        (1, 2, 2**31, 6),
        (1, 2, 2**40, 2**40),
        (2**40, 2, 2**31 - 1, 2**31 - 1),
    ],
)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_backward_input_shape_checked(input_shape, device):
    g = torch.ones(1, 2, 2, 2, dtype=torch.float64, device=device)
    argmax = torch.zeros(g.shape, dtype=torch.int32, device=device)
    with pytest.raises(RuntimeError, match="input_shape"):
        torch.ops.mmops._roi_align_backward(g, _HROIS.to(device), argmax, list(input_shape), 1.0, 2, "avg", True)


def test_feature_map_side_bounded_on_meta():
    x = torch.empty(1, 1, 2**31, 1, device="meta")
    with pytest.raises(RuntimeError, match="H and W of input to be at most 2"):
        op(x, _HROIS.to("meta").float(), [2, 2], 1.0, 2, "avg", True)


_NONFINITE_ROIS = [
    [0, 1.0, 1.0, math.nan, 4.0],
    [0, 1.0, 1.0, 4.0, math.nan],
    [0, 1.0, 1.0, -math.inf, 4.0],
    [0, 1.0, 1.0, 4.0, -math.inf],
    [0, 1.0, 1.0, math.inf, 4.0],
    [0, math.nan, 1.0, 4.0, 4.0],
    [0, 1.0, -math.inf, 4.0, 4.0],
    [0, math.inf, 1.0, 4.0, 4.0],
]


def _nonfinite_case(device, dtype):
    x = torch.randn(1, 3, 6, 6, dtype=torch.float64).to(device, dtype).requires_grad_()
    good = [0, 0.5, 0.5, 4.5, 4.5]
    rois = torch.tensor([good] + _NONFINITE_ROIS + [good], dtype=torch.float64).to(device, dtype)
    return x, rois


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_nonfinite_roi_pools_zeros_without_gradient(aligned, pool_mode, sampling_ratio):
    x, rois = _nonfinite_case("cpu", torch.float64)
    out = op(x, rois, [2, 2], 1.0, sampling_ratio, pool_mode, aligned)
    bad = out[1:-1]
    assert torch.equal(bad, torch.zeros_like(bad))
    ref = roi_align_ref(x.detach(), rois[:1], (2, 2), 1.0, sampling_ratio, pool_mode, aligned)
    torch.testing.assert_close(out[:1], ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out[-1:], ref, rtol=1e-10, atol=1e-10)
    # Only the two finite rois send gradient: the same as pooling them alone.
    (g,) = torch.autograd.grad(out.sum(), x)
    x2 = x.detach().clone().requires_grad_()
    out2 = op(x2, rois[[0, -1]], [2, 2], 1.0, sampling_ratio, pool_mode, aligned)
    (g2,) = torch.autograd.grad(out2.sum(), x2)
    torch.testing.assert_close(g, g2, rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
@pytest.mark.parametrize("deterministic", [False, True])
def test_cuda_nonfinite_rois_equal_cpu(dtype, aligned, pool_mode, deterministic):
    x, rois = _nonfinite_case("cpu", dtype)
    xc = x.detach().cuda().requires_grad_()
    out = op(x, rois, [2, 2], 1.0, 0, pool_mode, aligned)
    with deterministic_algorithms() if deterministic else contextlib.nullcontext():
        outc = op(xc, rois.cuda(), [2, 2], 1.0, 0, pool_mode, aligned)
        assert torch.equal(outc[1:-1].cpu(), torch.zeros_like(out[1:-1]))
        torch.testing.assert_close(outc.cpu(), out, **TOL[dtype])
        (gc,) = torch.autograd.grad(outc.float().sum(), xc)
    (g,) = torch.autograd.grad(out.float().sum(), x)
    torch.testing.assert_close(gc.cpu(), g, **TOL[dtype])


@pytest.mark.cuda
def test_cuda_sampling_ratio_bound():
    x, rois = _HX.cuda(), _HROIS.cuda()
    with pytest.raises(RuntimeError, match="sampling_ratio must be at most 512"):
        op(x, rois, [2, 2], 1.0, 2**32 + 1, "avg", True)
    out = op(x, rois, [1, 1], 1.0, 512, "max", True)
    torch.testing.assert_close(out.cpu(), op(_HX, _HROIS, [1, 1], 1.0, 512, "max", True), rtol=1e-10, atol=1e-10)
