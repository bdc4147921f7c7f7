"""Tests of mmops::bezier_align: the conformance cases, then the float64 loop reference
(bezier_align_reference.py), mmcv's known vectors, the straight-line Bezier against
roi_align, gradcheck, the border / NaN / batch-index rules, CUDA == CPU, the deterministic
backward and the mmcv bridge."""

import importlib
import math

import pytest
import torch
from bezier_align_reference import (
    bezier_align_composite,
    bezier_align_ref,
    box_rois,
    random_rois,
    text_rois,
)
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample, magnitude_tolerance
from conftest import TOL, deterministic_algorithms, strict_index_check

import mmops

op = torch.ops.mmops.bezier_align
bwd_op = torch.ops.mmops._bezier_align_backward
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


# --------------------------------------------------------------------------- inputs


def make_inputs(n, c, h, w, k, kind="text", seed=0, dtype=torch.float32, spatial_scale=1.0):
    """input [n, c, h, w] and rois [k, 17] of a distribution ("text", "random", "wild")."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    scale = spatial_scale
    if kind == "text":
        rois = text_rois(k, n, h, w, g, spatial_scale=scale)
    elif kind == "random":
        rois = random_rois(k, n, h, w, g, spatial_scale=scale)
    else:  # "wild": far outside, tiny, degenerate (all points equal) curves too
        rois = random_rois(k, n, h, w, g, spatial_scale=scale, margin=1.0)
        if k > 2:
            rois[1, 1:] = rois[1, 1:3].repeat(8)  # one point: zero size
            rois[2, 1:] = rois[2, 1:] * 0.01 + 3.0 / scale  # tiny
    return x.to(dtype), rois.to(dtype)


# --------------------------------------------------------------------------- conformance


def _sample(options):
    def make(device, dtype, size):
        # no size 17 (rois' last dim: torch.compile would give both one symbol)
        n, c, h, w, k = (2, 3, 10, 12, 6) if size == 0 else (3, 5, 14, 11, 8)
        x, rois = make_inputs(n, c, h, w, k, "random", seed=30 + size, dtype=dtype, spatial_scale=options[1])
        return Sample((x.to(device), rois.to(device), *options))

    return make


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    rois = make_inputs(2, 3, 6, 7, 4, "text", seed=1, dtype=dtype)[1].to(device)
    return [
        Sample(
            (torch.randn(2, 3, 6, 7, **f), torch.zeros(0, 17, **f), [2, 3], 1.0, 2, True), out_shapes=[(0, 3, 2, 3)]
        ),
        Sample((torch.randn(2, 0, 6, 7, **f), rois, [2, 3], 1.0, 2, True), out_shapes=[(4, 0, 2, 3)]),
        Sample(
            (torch.randn(0, 3, 5, 5, **f), torch.zeros(0, 17, **f), [2, 3], 1.0, 0, True), out_shapes=[(0, 3, 2, 3)]
        ),
    ]


def _cuda_samples(dtype):
    """Every option combination on both roi distributions, channel counts around a warp."""
    for aligned in (True, False):
        for sr in (0, 1, 2, -1):
            for scale in (1.0, 0.5):
                for kind in ("text", "random", "wild"):
                    x, rois = make_inputs(2, 3, 13, 21, 10, kind, seed=7, dtype=dtype, spatial_scale=scale)
                    yield Sample((x, rois, [4, 8], scale, sr, aligned))
    for c in (1, 33, 64):
        x, rois = make_inputs(2, c, 9, 30, 5, "text", seed=c, dtype=dtype)
        yield Sample((x, rois, [8, 32], 1.0, 0, True))


class _Net(torch.nn.Module):
    """bezier_align in a model: BezierAlign, the functional wrapper and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.align = mmops.BezierAlign((2, 3), 0.5, 2)
        self.legacy = mmops.BezierAlign(2, 0.5, 0, aligned=False)

    def forward(self, x: torch.Tensor, rois: torch.Tensor):
        a = self.align(x * 2.0, rois) + mmops.bezier_align(x.sin(), rois, [2, 3], 0.5, 1)
        b = torch.ops.mmops.bezier_align(x, rois, [3, 2], 0.5, -1, True).sum(dim=1)
        return a, b, self.legacy(x, rois)


def _helpers(sample):
    x, rois, out_size, *options = sample.args
    out = op(*sample.args)
    return [(bwd_op, (torch.randn_like(out), rois, list(x.shape), *options))]


def _message(text):
    return f"mmops::bezier_align: .*{text}"


def _with_batch_index(rois, value):
    rois = rois.clone()
    rois[2, 0] = value
    return rois


BAD_INPUTS = {
    "input_3d": BadInput(lambda x, r, *o: (x[0], r, *o), _message("input to be a 4-D"), meta=True),
    "int_input": BadInput(lambda x, r, *o: (x.int(), r.int(), *o), _message("input to have a floating"), meta=True),
    "rois_1d": BadInput(lambda x, r, *o: (x, r[0], *o), _message("rois to be a 2-D"), meta=True),
    "rois_5_cols": BadInput(lambda x, r, *o: (x, r[:, :5], *o), _message("rois of shape \\[K, 17\\]"), meta=True),
    "rois_18_cols": BadInput(
        lambda x, r, *o: (x, torch.cat([r, r[:, :1]], 1), *o), _message("rois of shape \\[K, 17\\]"), meta=True
    ),
    "rois_dtype": BadInput(lambda x, r, *o: (x, r.double(), *o), _message("rois to have the dtype"), meta=True),
    "output_h_zero": BadInput(lambda x, r, s, *o: (x, r, [0, 2], *o), _message("output_size"), meta=True),
    "output_w_negative": BadInput(lambda x, r, s, *o: (x, r, [2, -1], *o), _message("output_size"), meta=True),
    "output_size_3": BadInput(lambda x, r, s, *o: (x, r, [2, 2, 2], *o), "output_size"),
    "output_huge": BadInput(lambda x, r, s, *o: (x, r, [5000, 2], *o), _message("output_size"), meta=True),
    "spatial_scale_zero": BadInput(lambda x, r, s, sc, *o: (x, r, s, 0.0, *o), _message("spatial_scale"), meta=True),
    "spatial_scale_nan": BadInput(lambda x, r, s, sc, *o: (x, r, s, math.nan, *o), _message("spatial_scale")),
    "spatial_scale_inf": BadInput(lambda x, r, s, sc, *o: (x, r, s, math.inf, *o), _message("spatial_scale")),
    "sampling_ratio_huge": BadInput(
        lambda x, r, s, sc, sr, a: (x, r, s, sc, 513, a), _message("sampling_ratio must be at most 512"), meta=True
    ),
    "rois_on_cpu": BadInput(lambda x, r, *o: (x.cuda(), r, *o), "(?i)rois|device", cuda=True),
    **{
        f"batch_index_{v}": BadInput(lambda x, r, *o, v=v: (x, _with_batch_index(r, v), *o), _message("batch index"))
        for v in (-1.0, 2.0, math.nan)
    },
}


CONFORMANCE = [
    ConformanceCase(
        "bezier_align_aligned",
        op,
        _sample(([2, 3], 0.5, 2, True)),
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty,
        bad_inputs=BAD_INPUTS,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cuda_tol=magnitude_tolerance,  # input gradients sum many samples' shares
        cpu_float32_reference=True,
        nonzero_grads=True,
        script_grad_tol=dict(rtol=1e-6, atol=1e-6),
    ),
    ConformanceCase(
        "bezier_align_legacy_adaptive",
        op,
        _sample(([3, 2], 1.0, 0, False)),
        dtype=torch.float64,
        grad_args=(0,),
        feature_args=(0,),
        helpers=_helpers,
        dtypes=(),
    ),
]


class TestBezierAlignConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def grad_of(x, rois, go, *args):
    x = x.detach().requires_grad_(True)
    out = op(x, rois, *args)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


def ref_grad_of(x, rois, go, *args):
    xd = x.detach().double().requires_grad_(True)
    out = bezier_align_ref(xd, rois.double(), *args)
    (g,) = torch.autograd.grad(out, xd, go.double())
    return out.detach(), g


# (N, C, H, W, K, output_size, rois)
SHAPES = [
    (2, 3, 12, 20, 7, [4, 8], "text"),
    (1, 2, 9, 11, 6, [3, 5], "random"),
    (2, 1, 8, 8, 6, [2, 2], "wild"),
    (1, 4, 1, 13, 4, [2, 6], "random"),  # one row
    (1, 2, 10, 1, 4, [3, 1], "wild"),  # one column
]
OPTIONS = [(1.0, 0, True), (0.5, 2, True), (1.0, 1, False), (0.25, -1, False), (1.0, 3, True)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_matches_reference(dtype, options):
    scale, sr, aligned = options
    for i, (n, c, h, w, k, size, kind) in enumerate(SHAPES):
        x, rois = make_inputs(n, c, h, w, k, kind, seed=i, dtype=dtype, spatial_scale=scale)
        go = torch.randn(k, c, *size, generator=torch.Generator().manual_seed(100 + i)).to(dtype)
        out, grad = grad_of(x, rois, go, size, scale, sr, aligned)
        exp, gexp = ref_grad_of(x, rois, go, size, scale, sr, aligned)
        assert out.dtype == dtype and out.shape == (k, c, *size) and grad.dtype == dtype
        tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else TOL[dtype]
        if dtype == torch.float32:
            tol = dict(rtol=1e-5, atol=2e-5)
        torch.testing.assert_close(out.double(), exp, **tol)
        torch.testing.assert_close(grad.double(), gexp, **tol)


def test_matches_grid_sample_composite():
    # an independent vectorised formulation (fixed sampling ratio), larger maps, both distributions
    for kind in ("text", "random"):
        for aligned in (True, False):
            x, rois = make_inputs(2, 4, 24, 40, 12, kind, seed=5, dtype=torch.float64, spatial_scale=0.5)
            exp = bezier_align_composite(x, rois, (8, 32), 0.5, 2, aligned)
            torch.testing.assert_close(op(x, rois, [8, 32], 0.5, 2, aligned), exp, rtol=1e-10, atol=1e-10)


# mmcv's tests/test_ops/test_bezier_align.py: input [1, 1, 4, 4], one roi, output (4, 4),
# spatial_scale 1, sampling_ratio 1, aligned False; the output and the gradient of output.sum().
MMCV_INPUT = [[[[1.0, 2.0, 5.0, 6.0], [3.0, 4.0, 7.0, 8.0], [9.0, 10.0, 13.0, 14.0], [11.0, 12.0, 15.0, 16.0]]]]
MMCV_ROIS = [[0.0, 0.0, 0.0, 1, 0.0, 2.0, 0.0, 3.0, 0.0, 3.0, 3.0, 2.0, 3.0, 1.0, 3.0, 0.0, 3.0]]
MMCV_OUTPUT = [[[[1.0, 1.75, 3.5, 5.25], [2.5, 3.25, 5.0, 6.75], [6.0, 6.75, 8.5, 10.25], [9.5, 10.25, 12.0, 13.75]]]]
MMCV_GRAD = [
    [
        [
            [1.5625, 1.5625, 1.5625, 0.3125],
            [1.5625, 1.5625, 1.5625, 0.3125],
            [1.5625, 1.5625, 1.5625, 0.3125],
            [0.3125, 0.3125, 0.3125, 0.0625],
        ]
    ]
]


def _check_mmcv_vectors(fn, device, dtype):
    x = torch.tensor(MMCV_INPUT, dtype=dtype, device=device, requires_grad=True)
    rois = torch.tensor(MMCV_ROIS, dtype=dtype, device=device)
    out = fn(x, rois)
    out.backward(torch.ones_like(out))
    # multiples of 1/16 up to 16: exact in every dtype
    torch.testing.assert_close(out.detach().cpu(), torch.tensor(MMCV_OUTPUT, dtype=dtype), rtol=0, atol=0)
    torch.testing.assert_close(x.grad.cpu(), torch.tensor(MMCV_GRAD, dtype=dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mmcv_known_vectors(dtype):
    _check_mmcv_vectors(lambda x, r: mmops.bezier_align(x, r, (4, 4), 1.0, 1, False), "cpu", dtype)
    _check_mmcv_vectors(lambda x, r: mmops.BezierAlign(4, 1.0, 1, False)(x, r), "cpu", dtype)


def test_reference_reproduces_mmcv_vectors():
    x = torch.tensor(MMCV_INPUT, dtype=torch.float64, requires_grad=True)
    out = bezier_align_ref(x, torch.tensor(MMCV_ROIS, dtype=torch.float64), (4, 4), 1.0, 1, False)
    (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))
    torch.testing.assert_close(out, torch.tensor(MMCV_OUTPUT, dtype=torch.float64), rtol=0, atol=0)
    torch.testing.assert_close(grad, torch.tensor(MMCV_GRAD, dtype=torch.float64), rtol=0, atol=0)


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("spatial_scale", [1.0, 0.5])
def test_straight_line_bezier_is_roi_align_of_the_half_bin_shifted_box(aligned, spatial_scale):
    """Straight curves along a box's top and bottom edges (control points evenly spaced), one
    sample per bin (ABCNet's sampling_ratio): bin (ph, pw) is centred at u = pw / PW,
    v = ph / PH, the bin's lower edge, so the result is roi_align's for the same box moved
    by half a bin (of the box) to the left and up."""
    sampling_ratio = 1
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 16, 20, generator=g, dtype=torch.float64)
    size = [4, 5]
    xy = torch.rand(9, 2, generator=g, dtype=torch.float64) * torch.tensor([14.0, 10.0])
    wh = torch.rand(9, 2, generator=g, dtype=torch.float64) * torch.tensor([8.0, 6.0]) + 1.0
    if aligned:  # smaller than a pixel (not aligned, roi_align and bezier_align clamp it differently)
        wh[0] = torch.tensor([0.4, 0.2])
    batch = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1, 1], dtype=torch.float64)[:, None]
    boxes = torch.cat([batch, xy, xy + wh], 1) / spatial_scale
    boxes[:, 0] = batch[:, 0]
    roi_w, roi_h = wh[:, 0], wh[:, 1]
    shift = torch.stack([roi_w / size[1], roi_h / size[0]], 1) / 2 / spatial_scale  # half a bin
    shifted = boxes.clone()
    shifted[:, 1:3] -= shift
    shifted[:, 3:5] -= shift
    expected = mmops.roi_align(x, shifted, size, spatial_scale, sampling_ratio, "avg", aligned)
    got = op(x, box_rois(boxes), size, spatial_scale, sampling_ratio, aligned)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_horizontal_line_has_no_height():
    """roi_h is the vertical distance between each curve's ends (mmcv): 0 for a horizontal
    text line, so aligned with an adaptive grid it pools zeros; sampling_ratio 1 samples the
    bin centres, and with 2 the two rows of samples coincide (bin_h = 0)."""
    x = torch.randn(1, 2, 12, 16, dtype=torch.float64)
    line = box_rois(torch.tensor([[0.0, 2.0, 3.0, 13.0, 9.0]], dtype=torch.float64))
    assert (op(x, line, [3, 4], 1.0, 0, True) == 0).all()
    one = op(x, line, [3, 4], 1.0, 1, True)
    assert (one != 0).all()
    two = op(x, line, [3, 4], 1.0, 2, True)
    torch.testing.assert_close(two, bezier_align_ref(x, line, (3, 4), 1.0, 2, True), rtol=1e-12, atol=1e-12)
    # the x samples of the grid of 2 straddle the centre; rows coincide: the mean of two columns
    assert not torch.allclose(two, one)


@pytest.mark.parametrize("options", OPTIONS[:3], ids=str)
def test_gradcheck(options):
    scale, sr, aligned = options
    x, rois = make_inputs(2, 3, 7, 9, 5, "text", seed=3, dtype=torch.float64, spatial_scale=scale)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: op(t, rois, [3, 4], scale, sr, aligned), (x,))
    y, wild = make_inputs(1, 2, 6, 5, 4, "wild", seed=4, dtype=torch.float64, spatial_scale=scale)
    y.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: op(t, wild, [2, 3], scale, sr, aligned), (y,))


# --------------------------------------------------------------------------- rules


def test_bin_centres_follow_the_curves():
    # a ramp x + 100 y: one sample per bin (tiny bins) reads the bin centre's coordinates
    h, w = 30, 40
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64), indexing="ij")
    x = (xs + 100 * ys)[None, None]
    # an arch from (5, 10) to (35, 10) bending up to y = 4, 10 pixels high
    top = [(5.0, 10.0), (15.0, 2.0), (25.0, 2.0), (35.0, 10.0)]
    bottom = [(35.0, 20.0), (25.0, 12.0), (15.0, 12.0), (5.0, 20.0)]
    rois = torch.tensor([[0.0] + [c for p in top + bottom for c in p]], dtype=torch.float64)
    out = op(x, rois, [2, 4], 1.0, 1, False)[0, 0]
    # roi_w = 30, roi_h = 10: bins 7.5 x 5; the sample is the centre shifted by 0: at (cx, cy)
    for ph in range(2):
        for pw in range(4):
            u, v = pw / 4, ph / 2
            bx = [(1 - u) ** 3, 3 * u * (1 - u) ** 2, 3 * u * u * (1 - u), u**3]
            cx = sum(b * p[0] for b, p in zip(bx, top)) * (1 - v) + sum(b * p[0] for b, p in zip(bx, bottom[::-1])) * v
            cy = sum(b * p[1] for b, p in zip(bx, top)) * (1 - v) + sum(b * p[1] for b, p in zip(bx, bottom[::-1])) * v
            assert out[ph, pw].item() == pytest.approx(cx + 100 * cy, abs=1e-9)


def test_borders_clamp_and_outside_samples_count_as_zero():
    x = torch.arange(1.0, 10.0, dtype=torch.float64).view(1, 1, 3, 3)
    # a 1 x 1 box around (-0.5, -0.5), one sample per bin: in [-1, 0) on both axes -> pixel (0, 0)
    box = torch.tensor([[0.0, -1.0, -1.0, 0.0, 0.0]], dtype=torch.float64)
    assert op(x, box_rois(box), [1, 1], 1.0, 1, False).item() == 1.0
    # far outside: every sample is worth 0
    far = torch.tensor([[0.0, -9.0, -9.0, -5.0, -5.0]], dtype=torch.float64)
    assert op(x, box_rois(far), [2, 2], 1.0, 2, True).abs().sum().item() == 0.0
    # half outside (x in [2.5, 4.5], y in row 1): two samples in [2, 3] clamp to column 2, two
    # past x = 3 are worth 0 but count in the average
    half = torch.tensor([[0.0, 2.5, 1.0, 4.5, 1.0]], dtype=torch.float64)
    out = op(x, box_rois(half), [1, 1], 1.0, 4, False)  # roi_h clamps to 1
    exp = bezier_align_ref(x, box_rois(half), (1, 1), 1.0, 4, False)
    torch.testing.assert_close(out, exp, rtol=0, atol=1e-12)
    assert 0 < out.item() < 6.0


def test_non_finite_rois_pool_zeros_without_gradient():
    x, rois = make_inputs(1, 2, 6, 7, 4, "text", seed=8, dtype=torch.float64)
    rois[0, 3] = math.nan
    rois[1, 16] = math.inf
    rois[2, 9] = -math.inf
    x.requires_grad_(True)
    out = op(x, rois, [2, 3], 1.0, 0, True)
    assert (out[:3] == 0).all() and (out[3] != 0).any()
    torch.testing.assert_close(out, bezier_align_ref(x.detach(), rois, (2, 3), 1.0, 0, True), rtol=0, atol=1e-12)
    out[:3].sum().backward()
    assert (x.grad == 0).all()
    # a huge but finite roi: a size past float32's range pools zeros too (float32)
    big = rois[3:].float().clone()
    big[0, 1], big[0, 7] = -3e38, 3e38
    assert (op(x.detach().float(), big, [2, 3], 1.0, 0, True) == 0).all()


def test_batch_index_is_checked_on_cpu():
    x, rois = make_inputs(2, 2, 6, 7, 4, "text", seed=9)
    for v in (-1.0, 2.0, math.nan):
        bad = rois.clone()
        bad[1, 0] = v
        with pytest.raises(RuntimeError, match="batch index rois\\[:, 0\\]"):
            op(x, bad, [2, 2])
    fractional = rois.clone()
    fractional[:, 0] = torch.tensor([0.5, 1.9, 0.0, 1.0])  # truncated, as mmcv's int cast
    truncated = fractional.clone()
    truncated[:, 0] = truncated[:, 0].floor()
    torch.testing.assert_close(op(x, fractional, [2, 2]), op(x, truncated, [2, 2]), rtol=0, atol=0)


def test_adaptive_grid_and_negative_sampling_ratio():
    # sampling_ratio <= 0: ceil(roi side / output side) samples per bin side (mmcv); -1 == 0
    x, rois = make_inputs(1, 2, 20, 30, 5, "random", seed=10, dtype=torch.float64)
    out = op(x, rois, [3, 4], 1.0, 0, True)
    torch.testing.assert_close(op(x, rois, [3, 4], 1.0, -3, True), out, rtol=0, atol=0)
    torch.testing.assert_close(out, bezier_align_ref(x, rois, (3, 4), 1.0, 0, True), rtol=1e-12, atol=1e-12)


def test_degenerate_aligned_roi_pools_zeros():
    # aligned, zero size: an empty sample grid (mmcv's count = max(0, 1)): zeros
    x = torch.randn(1, 2, 5, 5, dtype=torch.float64)
    point = torch.tensor([[0.0] + [2.0, 2.0] * 8], dtype=torch.float64)
    assert (op(x, point, [2, 2], 1.0, 0, True) == 0).all()
    # not aligned: the size clamps to 1 and the bin samples around the point
    torch.testing.assert_close(
        op(x, point, [2, 2], 1.0, 0, False), bezier_align_ref(x, point, (2, 2), 1.0, 0, False), rtol=0, atol=1e-12
    )


def test_strided_and_channels_last_inputs():
    x, rois = make_inputs(2, 3, 9, 10, 6, "text", seed=6)
    wide = torch.randn(2, 6, 9, 20)[:, ::2, :, ::2]
    wide.copy_(x)
    assert not wide.is_contiguous()
    exp = op(x, rois, [3, 4])
    torch.testing.assert_close(op(wide, rois, [3, 4]), exp, rtol=0, atol=0)
    torch.testing.assert_close(op(x.contiguous(memory_format=torch.channels_last), rois, [3, 4]), exp, rtol=0, atol=0)
    strided = torch.randn(6, 34)[:, ::2]
    strided.copy_(rois)
    torch.testing.assert_close(op(x, strided, [3, 4]), exp, rtol=0, atol=0)
    go = torch.randn(6, 3, 4, 3, dtype=torch.float32).transpose(2, 3)
    _, g1 = grad_of(x, rois, go, [3, 4])
    _, g2 = grad_of(x, rois, go.contiguous(), [3, 4])
    torch.testing.assert_close(g1, g2, rtol=0, atol=0)


def test_module_and_functional():
    x, rois = make_inputs(1, 2, 6, 8, 3, "text", seed=11)
    module = mmops.BezierAlign((4, 8), 1.0, 2)
    assert repr(module) == "BezierAlign(output_size=(4, 8), spatial_scale=1.0, sampling_ratio=2, aligned=True)"
    torch.testing.assert_close(module(x, rois), mmops.bezier_align(x, rois, (4, 8), 1.0, 2), rtol=0, atol=0)
    scripted = torch.jit.script(module)
    torch.testing.assert_close(scripted(x, rois), module(x, rois), rtol=0, atol=0)
    with pytest.raises(ValueError, match="output_size"):
        mmops.BezierAlign((1, 2, 3), 1.0, 0)


def test_deterministic_mode_gives_the_same_gradient():
    x, rois = make_inputs(2, 2, 8, 9, 6, "text", seed=12, dtype=torch.float64)
    go = torch.randn(6, 2, 3, 5, dtype=torch.float64)
    _, g = grad_of(x, rois, go, [3, 5])
    with deterministic_algorithms():
        _, g_det = grad_of(x, rois, go, [3, 5])
    torch.testing.assert_close(g_det, g, rtol=0, atol=0)  # the CPU backward is deterministic anyway


def test_cpu_results_do_not_depend_on_the_thread_count():
    x, rois = make_inputs(2, 20, 10, 14, 12, "random", seed=13)
    go = torch.randn(12, 20, 4, 6, generator=torch.Generator().manual_seed(20))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        out1, g1 = grad_of(x, rois, go, [4, 6])
        torch.set_num_threads(max(2, threads))
        out2, g2 = grad_of(x, rois, go, [4, 6])
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(out1, out2) and torch.equal(g1, g2)


def test_autocast_runs_mixed_inputs_in_float32():
    x, rois = make_inputs(1, 2, 6, 7, 3, "text", seed=14)
    with pytest.raises(RuntimeError, match="rois"):
        op(x.bfloat16(), rois, [2, 3])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x.bfloat16(), rois, [2, 3])  # bfloat16 features, float32 rois
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, op(x.bfloat16().float(), rois, [2, 3]).bfloat16(), rtol=0, atol=0)


def test_double_backward_refused():
    x, rois = make_inputs(1, 1, 5, 5, 2, "text", seed=15, dtype=torch.float64)
    x.requires_grad_(True)
    go = torch.randn(2, 1, 2, 2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(x, rois, [2, 2]), x, go, create_graph=True)


def test_backward_helper_checks():
    x, rois = make_inputs(1, 2, 5, 6, 3, "text", seed=16)
    go = torch.randn(3, 2, 2, 2)
    shape = list(x.shape)
    with pytest.raises(RuntimeError, match=_message("input_shape to hold 4 values")):
        bwd_op(go, rois, shape[:3], 1.0, 0, True)
    with pytest.raises(RuntimeError, match=_message("C = 3 channels")):
        bwd_op(go, rois, [1, 3, 5, 6], 1.0, 0, True)
    with pytest.raises(RuntimeError, match=_message("grad_output has 2 rows")):
        bwd_op(go[:2], rois, shape, 1.0, 0, True)
    with pytest.raises(RuntimeError, match=_message("rois of shape")):
        bwd_op(go, rois[:, :5], shape, 1.0, 0, True)
    with pytest.raises(RuntimeError, match=_message("spatial_scale")):
        bwd_op(go, rois, shape, -1.0, 0, True)
    with pytest.raises(RuntimeError, match=_message("sampling_ratio")):
        bwd_op(go, rois, shape, 1.0, 1000, True)
    with pytest.raises(RuntimeError, match=_message("rois to have the dtype of grad_output")):
        bwd_op(go, rois.double(), shape, 1.0, 0, True)


def test_huge_sizes_give_our_error():
    x = torch.empty(1, 2, 4, 2**31, device="meta")
    with pytest.raises(RuntimeError, match=_message("at most 2\\^31 - 1")):
        op(x, torch.empty(1, 17, device="meta"), [2, 2])
    x = torch.empty(2**20, 2**20, 1, 1, device="meta")
    with pytest.raises(RuntimeError, match=_message("does not fit in int64")):
        op(x, torch.empty(2**30, 17, device="meta"), [4096, 4096])


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["text", "random", "wild"])
def test_cuda_matches_cpu(dtype, kind):
    for n, c, h, w, k, size, scale, sr, aligned in [
        (2, 5, 30, 70, 40, [8, 32], 0.5, 0, True),
        (1, 3, 33, 17, 9, [3, 3], 1.0, 2, False),
        (3, 64, 12, 20, 30, [4, 8], 0.25, 1, True),
        (2, 256, 16, 40, 20, [8, 32], 1.0, 2, True),
    ]:
        x, rois = make_inputs(n, c, h, w, k, kind, seed=21, dtype=dtype, spatial_scale=scale)
        go = torch.randn(k, c, *size, generator=torch.Generator().manual_seed(22)).to(dtype)
        out_c, grad_c = grad_of(x.cuda(), rois.cuda(), go.cuda(), size, scale, sr, aligned)
        if dtype == torch.float32:
            # float32 sample positions put each device ~1e-5 x max|value| from float64 (the CPU
            # too): CUDA is held to twice that bound around the float64 result
            out, grad = grad_of(x.double(), rois.double(), go.double(), size, scale, sr, aligned)
            out_c, grad_c = out_c.double(), grad_c.double()
            tol_out, tol_grad = (
                {k: 2 * v for k, v in magnitude_tolerance(dtype, what, t).items()}
                for what, t in (("out", out), ("grad", grad))
            )
        else:
            out, grad = grad_of(x, rois, go, size, scale, sr, aligned)
            tol_out, tol_grad = TOL[dtype], magnitude_tolerance(dtype, "grad", grad)
        torch.testing.assert_close(out_c.cpu(), out, **tol_out)
        torch.testing.assert_close(grad_c.cpu(), grad, **tol_grad)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_mmcv_known_vectors(dtype):
    _check_mmcv_vectors(lambda x, r: mmops.bezier_align(x, r, (4, 4), 1.0, 1, False), "cuda", dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_deterministic_backward(dtype):
    x, rois = make_inputs(2, 6, 20, 30, 25, "text", seed=23, dtype=dtype)
    go = torch.randn(25, 6, 4, 8, generator=torch.Generator().manual_seed(24)).to(dtype)
    _, expected = grad_of(x, rois, go, [4, 8])  # CPU: deterministic
    with deterministic_algorithms():
        _, g1 = grad_of(x.cuda(), rois.cuda(), go.cuda(), [4, 8])
        _, g2 = grad_of(x.cuda(), rois.cuda(), go.cuda(), [4, 8])
    assert torch.equal(g1, g2)  # bitwise repeatable
    torch.testing.assert_close(g1.cpu(), expected, **TOL[dtype])
    go[0, 0, 0, 0] = math.inf  # a non-finite gradient: NaN everywhere (documented)
    with deterministic_algorithms():
        _, g_inf = grad_of(x.cuda(), rois.cuda(), go.cuda(), [4, 8])
    assert torch.isnan(g_inf).all()


@pytest.mark.cuda
def test_cuda_bad_batch_index_is_guarded_or_strict():
    x, rois = make_inputs(2, 3, 8, 8, 6, "text", seed=25)
    x, rois = x.cuda().requires_grad_(True), rois.cuda()
    for row, v in zip((0, 2, 4), (-1.0, 2.0, math.nan)):
        rois[row, 0] = v
    out = op(x, rois, [2, 2])
    assert (out[[0, 2, 4]] == 0).all()
    good = [1, 3, 5]
    torch.testing.assert_close(out[good].cpu(), op(x.detach().cpu(), rois[good].cpu(), [2, 2]), **TOL[torch.float32])
    out.sum().backward()
    expected = torch.autograd.grad(op(x, rois[good], [2, 2]).sum(), x)[0]
    torch.testing.assert_close(x.grad, expected, **TOL[torch.float32])
    with strict_index_check(True):
        with pytest.raises(RuntimeError, match="batch index"):
            op(x, rois, [2, 2])


@pytest.mark.cuda
def test_cuda_empty_inputs():
    e = torch.randn(2, 0, 3, 3, device="cuda", requires_grad=True)
    rois = make_inputs(2, 1, 3, 3, 4, "text", seed=26)[1].cuda()
    out = op(e, rois, [2, 2])
    assert out.shape == (4, 0, 2, 2)
    out.sum().backward()
    assert e.grad.shape == e.shape


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.bezier_align")
    assert "mmcv.ops.bezier_align.BezierAlignFunction" in mmops.mmcv_ops.routed_ops()
    for dtype in (torch.float32, torch.float64):
        _check_mmcv_vectors(lambda x, r: ops.bezier_align(x, r, (4, 4), 1.0, 1, False), "cpu", dtype)
        _check_mmcv_vectors(lambda x, r: ops.BezierAlign((4, 4), 1.0, 1, False)(x, r), "cpu", dtype)
    x, rois = make_inputs(2, 3, 9, 12, 5, "text", seed=27, dtype=torch.float64)
    exp = op(x, rois, [2, 4], 0.5, 0, True)
    torch.testing.assert_close(module.BezierAlignFunction.apply(x, rois, (2, 4), 0.5), exp, rtol=0, atol=0)
    torch.testing.assert_close(
        module.BezierAlignFunction.apply(x, rois, 3, 0.5, 2), op(x, rois, [3, 3], 0.5, 2), rtol=0, atol=0
    )
    # mmcv's kernel contract: fills output, then grad_input
    out = x.new_zeros(exp.shape)
    module.ext_module.bezier_align_forward(
        x, rois, out, aligned_height=2, aligned_width=4, spatial_scale=0.5, sampling_ratio=0, aligned=True
    )
    torch.testing.assert_close(out, exp, rtol=0, atol=0)
    go = torch.randn_like(out)
    grad_in = torch.zeros_like(x)
    module.ext_module.bezier_align_backward(
        go, rois, grad_in, aligned_height=2, aligned_width=4, spatial_scale=0.5, sampling_ratio=0, aligned=True
    )
    torch.testing.assert_close(grad_in, bwd_op(go, rois, list(x.shape), 0.5, 0, True), rtol=0, atol=0)
