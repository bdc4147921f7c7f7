"""Tests of mmops::ps_roi_align and mmops::ps_roi_pool: the conformance cases, then the
float64 references, known vectors, gradcheck, torchvision, special inputs and the
CUDA-specific tests."""

import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import (
    TOL,
    assert_same_fwd_bwd,
    deterministic_algorithms,
    invalid_batch_index_inputs,
    random_rois,
    requires_torchvision,
    strict_index_check,
    with_batch_index,
)
from ps_roi_reference import ps_roi_align_ref, ps_roi_pool_ref

import mmops

align_op = torch.ops.mmops.ps_roi_align
pool_op = torch.ops.mmops.ps_roi_pool

# (N, C_out, H, W), output_size: input channels C_out * PH * PW
CASES = [((1, 1, 5, 5), (2, 2)), ((2, 2, 7, 12), (3, 2)), ((2, 3, 11, 9), (1, 4))]


def _input(N, C_out, H, W, out_size, dtype=torch.float64):
    return torch.randn(N, C_out * out_size[0] * out_size[1], H, W, dtype=dtype)


def _run(name, x, rois, out_size, scale, sr=-1):
    if name == "align":
        return align_op(x, rois, list(out_size), scale, sr)
    return pool_op(x, rois, list(out_size), scale)


def _ref(name, x, rois, out_size, scale, sr=-1):
    if name == "align":
        return ps_roi_align_ref(x, rois, out_size, scale, sr)
    return ps_roi_pool_ref(x, rois, out_size, scale)


def grad_pair(name, x, rois, go, out_size, scale, sr=-1):
    """(output, input gradient) of mmops and of the float64 reference."""
    xa = x.detach().requires_grad_(True)
    out = _run(name, xa, rois, out_size, scale, sr)
    (g,) = torch.autograd.grad(out, xa, go)
    xr = x.detach().double().requires_grad_(True)
    exp = _ref(name, xr, rois, out_size, scale, sr)
    (gexp,) = torch.autograd.grad(exp, xr, go.double()) if exp.requires_grad else (torch.zeros_like(xr),)
    return out, g, exp.detach(), gexp


# --------------------------------------------------------------------------- conformance


def _sample_args(name, device, dtype, size):
    # output_size stays (a Python constant in compiled code); every tensor dim changes, and no
    # two sizes are equal (duck sizing would tie them)
    (N, C_out, H, W), out_size, K = ((2, 2, 10, 11), [2, 3], 6) if size == 0 else ((3, 3, 14, 9), [2, 3], 8)
    torch.manual_seed(20 + size)
    x = _input(N, C_out, H, W, out_size, dtype=dtype)
    rois = random_rois(K, N, H, W, dtype=dtype, spatial_scale=0.5)
    args = (x.to(device), rois.to(device), out_size, 0.5)
    return Sample(args + (2,) if name == "align" else args)


def _empty(name):
    def make(device, dtype):
        f = dict(dtype=dtype, device=device)
        tail = (1.0, -1) if name == "align" else (1.0,)
        return [
            Sample((torch.randn(2, 12, 6, 7, **f), torch.zeros(0, 5, **f), [2, 3]) + tail, out_shapes=[(0, 2, 2, 3)]),
            Sample(
                (torch.randn(2, 0, 6, 7, **f), random_rois(4, 2, 6, 7, **f), [2, 3]) + tail, out_shapes=[(4, 0, 2, 3)]
            ),
        ]

    return make


def _cuda_samples(name):
    def make(dtype):
        torch.manual_seed(9)
        for scale in (1.0, 0.5, 0.25):
            # maps of several 16 x 16 tiles, more than one chunk of 8 output channels
            for (N, C_out, H, W), out_size in CASES + [((2, 10, 30, 41), (3, 3)), ((1, 21, 18, 16), (2, 2))]:
                x = _input(N, C_out, H, W, out_size).to(dtype)
                rois = random_rois(40, N, H, W, dtype=dtype, spatial_scale=scale)
                args = (x, rois, list(out_size), scale)
                yield Sample(args + (-1,) if name == "align" else args)
                if name == "align":
                    yield Sample(args + (2,))

    return make


class _AlignNet(torch.nn.Module):
    """ps_roi_align in a model: PSRoIAlign and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.PSRoIAlign((2, 3), 0.5, 2)

    def forward(self, x: torch.Tensor, rois: torch.Tensor):
        computed = torch.ops.mmops.ps_roi_align(x * 1.5, rois, [2, 3], 0.5, -1).sin().sum(dim=1)
        return computed, self.pool(x * 2.0, rois) + torch.ops.mmops.ps_roi_align(x, rois, [2, 3], 0.25, 1)


class _PoolNet(torch.nn.Module):
    """ps_roi_pool in a model: PSRoIPool and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.PSRoIPool((2, 3), 0.5)

    def forward(self, x: torch.Tensor, rois: torch.Tensor):
        computed = torch.ops.mmops.ps_roi_pool(x * 1.5, rois, [2, 3], 0.5).sin().sum(dim=1)
        return computed, self.pool(x * 2.0, rois) + torch.ops.mmops.ps_roi_pool(x, rois, [2, 3], 0.25)


def _align_helpers(sample):
    x, rois, out_size, scale, sr = sample.args
    out = align_op(*sample.args)
    return [(torch.ops.mmops._ps_roi_align_backward, (torch.randn_like(out), rois, list(x.shape), scale, sr))]


def _pool_helpers(sample):
    x, rois, out_size, scale = sample.args
    out = pool_op(*sample.args)
    return [(torch.ops.mmops._ps_roi_pool_backward, (torch.randn_like(out), rois, list(x.shape), scale))]


def _bad_inputs(name):
    msg = f"mmops::ps_roi_{name}: "
    t = (2,) if name == "align" else ()

    def bad(f, text):
        return BadInput(f, msg + ".*" + text)

    cases = {
        "input_3d": bad(lambda x, r, *o: (x[0], r, [2, 3], 1.0) + t, "input"),
        "rois_1d": bad(lambda x, r, *o: (x, r[0], [2, 3], 1.0) + t, "rois"),
        "rois_4_cols": bad(lambda x, r, *o: (x, r[:, :4], [2, 3], 1.0) + t, "rois"),
        "rois_dtype": bad(lambda x, r, *o: (x, r.double(), [2, 3], 1.0) + t, "rois"),
        "int_input": bad(lambda x, r, *o: (x.int(), r.int(), [2, 3], 1.0) + t, "input"),
        "channels_not_multiple": bad(lambda x, r, *o: (x, r, [5, 5], 1.0) + t, "multiple of output_size"),
        "output_h_zero": bad(lambda x, r, *o: (x, r, [0, 3], 1.0) + t, "output_size"),
        "output_w_negative": bad(lambda x, r, *o: (x, r, [2, -3], 1.0) + t, "output_size"),
        "spatial_scale_zero": bad(lambda x, r, *o: (x, r, [2, 3], 0.0) + t, "spatial_scale"),
        "spatial_scale_nan": bad(lambda x, r, *o: (x, r, [2, 3], math.nan) + t, "spatial_scale"),
        "spatial_scale_inf": bad(lambda x, r, *o: (x, r, [2, 3], math.inf) + t, "spatial_scale"),
        **{
            f"batch_index_{v}": bad(
                lambda x, r, *o, v=v: (x, with_batch_index(r, 2, v), [2, 3], 1.0) + t, "batch index"
            )
            for v in (-1.0, 2.0, 7.0, math.nan)
        },
    }
    if name == "align":
        cases["sampling_ratio_huge"] = bad(lambda x, r, *o: (x, r, [2, 3], 1.0, 513), "sampling_ratio")
    return cases


def _case(name, op, module, helpers):
    return ConformanceCase(
        f"ps_roi_{name}",
        op,
        lambda device, dtype, size: _sample_args(name, device, dtype, size),
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty(name),
        module=module,
        helpers=helpers,
        cuda_samples=_cuda_samples(name),
        bad_inputs=_bad_inputs(name),
    )


CONFORMANCE = [
    _case("align", align_op, _AlignNet, _align_helpers),
    _case("pool", pool_op, _PoolNet, _pool_helpers),
]


class TestPSRoIConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


@pytest.mark.parametrize("name,sr", [("align", -1), ("align", 0), ("align", 1), ("align", 3), ("pool", None)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.25])
def test_matches_reference(name, sr, scale, dtype):
    torch.manual_seed(0)
    for (N, C_out, H, W), out_size in CASES:
        x = _input(N, C_out, H, W, out_size, dtype=dtype)
        rois = random_rois(10, N, H, W, dtype=dtype, spatial_scale=scale)
        go = torch.randn(10, C_out, *out_size, dtype=dtype)
        out, g, exp, gexp = grad_pair(name, x, rois, go, out_size, scale, sr)
        assert exp.abs().sum() > 0 and gexp.abs().sum() > 0
        assert out.dtype == dtype and out.shape == (10, C_out, *out_size)
        torch.testing.assert_close(out, exp.to(dtype), **TOL[dtype])
        torch.testing.assert_close(g, gexp.to(dtype), **TOL[dtype])


@pytest.mark.parametrize("name", ["align", "pool"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_matches_reference(name, dtype):
    torch.manual_seed(1)
    for (N, C_out, H, W), out_size in CASES:
        x = _input(N, C_out, H, W, out_size).to(dtype)
        rois = random_rois(10, N, H, W, dtype=dtype, spatial_scale=0.5)
        go = torch.randn(10, C_out, *out_size).to(dtype)
        out, g, exp, gexp = grad_pair(name, x, rois, go, out_size, 0.5)
        assert out.dtype == dtype and g.dtype == dtype
        torch.testing.assert_close(out.double(), exp, **TOL[dtype])
        torch.testing.assert_close(g.double(), gexp, **TOL[dtype])


def test_channel_mapping():
    """Output (k, c, i, j) reads input channel (c * PH + i) * PW + j only."""
    PH, PW, C_out = 2, 3, 2
    x = torch.arange(C_out * PH * PW, dtype=torch.float64).reshape(1, -1, 1, 1).expand(1, -1, 4, 4).contiguous()
    rois = torch.tensor([[0, 0, 0, 4, 4]], dtype=torch.float64)
    expected = torch.arange(C_out * PH * PW, dtype=torch.float64).reshape(1, C_out, PH, PW)
    torch.testing.assert_close(align_op(x, rois, [PH, PW], 1.0, -1), expected, rtol=0, atol=0)
    torch.testing.assert_close(pool_op(x, rois, [PH, PW], 1.0), expected, rtol=0, atol=0)


# (op, input plane 4x4 ramp, roi, output_size, scale, sampling_ratio, output), derived by hand
RAMP = torch.arange(16.0, dtype=torch.float64).reshape(4, 4)
KNOWN = [
    # pool: box (0, 0)-(2, 2): 2 x 2 pixels [0, 2), one bin: mean of 0, 1, 4, 5
    ("pool", [0, 0, 0, 2, 2], (1, 1), 1.0, None, [[2.5]]),
    # pool: rounding half away from zero: (0.5, 0.5, 2.5, 2.5) -> (1, 1, 3, 3): pixels [1, 3)
    ("pool", [0, 0.5, 0.5, 2.5, 2.5], (1, 1), 1.0, None, [[(5 + 6 + 9 + 10) / 4]]),
    # pool: the whole map (0, 0)-(4, 4), 2 x 2 bins of [0, 2), [2, 4) -> clamped to [2, 3):
    # torchvision's forward never reads the last row / column
    ("pool", [0, 0, 0, 4, 4], (2, 2), 1.0, None, [[2.5, 4.0], [8.5, 10.0]]),
    # pool: degenerate box (1, 1)-(1, 1): size max(0, 1) = 1, pixel (1, 1)
    ("pool", [0, 1, 1, 1, 1], (1, 1), 1.0, None, [[5.0]]),
    # pool: box outside the map: clamped to the last pixel, empty bin -> 0
    ("pool", [0, 10, 10, 12, 12], (1, 1), 1.0, None, [[0.0]]),
    # align: box (0.5, 0.5)-(2.5, 2.5) -> (0, 0)-(2, 2) after -0.5; one sample per bin at
    # the bin centres (0.5, 0.5), (0.5, 1.5), ...: the ramp is linear, value 4 y + x
    ("align", [0, 0.5, 0.5, 2.5, 2.5], (2, 2), 1.0, 1, [[2.5, 3.5], [6.5, 7.5]]),
    # align: adaptive grid ceil(2 / 1) = 2 per side: samples at 0.5, 1.5: mean 4 * 1 + 1
    ("align", [0, 0.5, 0.5, 2.5, 2.5], (1, 1), 1.0, -1, [[5.0]]),
    # align: spatial_scale 0.5: (1, 1, 5, 5) * 0.5 -> the same box
    ("align", [0, 1, 1, 5, 5], (2, 2), 0.5, 1, [[2.5, 3.5], [6.5, 7.5]]),
    # align: zero-size box, adaptive grid: no samples -> 0 (torchvision: 0 / 0 = NaN)
    ("align", [0, 1, 1, 1, 1], (1, 1), 1.0, -1, [[0.0]]),
    # align: zero-size box, fixed grid: the point (0.5, 0.5) -> 4 * 0.5 + 0.5
    ("align", [0, 1, 1, 1, 1], (1, 1), 1.0, 2, [[2.5]]),
    # align: samples beyond the last row / column read it (clamped): the point (3.5, 3.5) -> 15
    ("align", [0, 4, 4, 4, 4], (1, 1), 1.0, 1, [[15.0]]),
    # align: samples past size + 1 are worth 0
    ("align", [0, 6, 6, 6, 6], (1, 1), 1.0, 1, [[0.0]]),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(KNOWN)))
def test_known_vectors(case, dtype):
    name, roi, out_size, scale, sr, expected = KNOWN[case]
    x = RAMP.reshape(1, 1, 4, 4).to(dtype)
    rois = torch.tensor([roi], dtype=dtype)
    # one input channel per bin: replicate the plane
    x = x.expand(1, out_size[0] * out_size[1], 4, 4).contiguous()
    out = _run(name, x, rois, out_size, scale, sr)
    torch.testing.assert_close(out[0, 0], torch.tensor(expected, dtype=dtype), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(_ref(name, x, rois, out_size, scale, sr)[0, 0], torch.tensor(expected).double())


# --------------------------------------------------------------------------- gradcheck


@pytest.mark.parametrize("name,sr", [("align", -1), ("align", 2), ("pool", None)])
def test_gradcheck(name, sr):
    torch.manual_seed(2)
    x = _input(2, 2, 9, 11, (3, 2)).requires_grad_(True)
    rois = torch.tensor(
        [[0, 0.9, 1.2, 8.3, 7.4], [1, 2.1, 0.8, 4.2, 3.3], [1, -2, -1, 12, 10], [0, 5, 5, 5, 5], [1, 8, 7, 2, 1]],
        dtype=torch.float64,
    )
    assert torch.autograd.gradcheck(
        lambda t: _run(name, t, rois, (3, 2), 1.0, sr), (x,), check_batched_grad=False, fast_mode=True
    )
    assert torch.autograd.gradcheck(
        lambda t: _run(name, t, rois, (3, 2), 0.5, sr), (x,), check_batched_grad=False, fast_mode=True
    )


@pytest.mark.parametrize("name", ["align", "pool"])
def test_double_backward_raises(name):
    x = _input(1, 1, 6, 6, (2, 2)).requires_grad_(True)
    out = _run(name, x, random_rois(4, 1, 6, 6, dtype=torch.float64), (2, 2), 1.0)
    go = torch.randn_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        (g,) = torch.autograd.grad(out, x, go, create_graph=True)
        torch.autograd.grad(g.sum(), (x, go))


# --------------------------------------------------------------------------- torchvision


def _ordered_rois(K, N, H, W, dtype, scale):
    # torchvision gives NaN for a zero-size ps_roi_align box (0 / 0) and -0.0 for a
    # reversed one; mmops gives 0: compare on boxes with x1 < x2, y1 < y2
    rois = random_rois(K, N, H, W, dtype=dtype, spatial_scale=scale, extra=False, ordered=True)
    rois[:, 3:] = torch.maximum(rois[:, 3:], rois[:, 1:3] + 0.25 / scale)
    return rois


@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.0625])
@pytest.mark.parametrize("sr", [-1, 2])
def test_align_matches_torchvision(sr, scale, dtype):
    import torchvision

    torch.manual_seed(3)
    for (N, C_out, H, W), out_size in CASES + [((2, 3, 25, 42), (7, 7))]:
        x = _input(N, C_out, H, W, out_size, dtype=dtype)
        rois = _ordered_rois(16, N, H, W, dtype, scale)
        go = torch.randn(16, C_out, *out_size, dtype=dtype)
        xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        out = mmops.ps_roi_align(xa, rois, out_size, scale, sr)
        exp = torchvision.ops.ps_roi_align(xb, rois, out_size, scale, sr)
        assert_same_fwd_bwd(out, exp, xa, xb, go, TOL[dtype], TOL[dtype])


@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.0625])
def test_pool_matches_torchvision_forward(scale, dtype):
    import torchvision

    torch.manual_seed(4)
    for (N, C_out, H, W), out_size in CASES + [((2, 3, 25, 42), (7, 7))]:
        x = _input(N, C_out, H, W, out_size, dtype=dtype)
        rois = random_rois(16, N, H, W, dtype=dtype, spatial_scale=scale)
        out = mmops.ps_roi_pool(x, rois, out_size, scale)
        exp = torchvision.ops.ps_roi_pool(x, rois, out_size, scale)
        torch.testing.assert_close(out, exp, **TOL[dtype])


@requires_torchvision
def test_pool_gradient_matches_torchvision_inside_the_map():
    """torchvision's backward clamps bins into [0, size] while its forward clamps into
    [0, size - 1]; where no bin reaches the last row / column the gradients agree."""
    import torchvision

    torch.manual_seed(5)
    N, C_out, H, W, out_size = 2, 2, 20, 24, (3, 3)
    x = _input(N, C_out, H, W, out_size)
    xy = torch.rand(16, 2, dtype=torch.float64) * 12
    wh = torch.rand(16, 2, dtype=torch.float64) * 6 + 1
    rois = torch.cat([torch.randint(0, N, (16, 1)).double(), xy, xy + wh], 1)
    go = torch.randn(16, C_out, *out_size, dtype=torch.float64)
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    out = mmops.ps_roi_pool(xa, rois, out_size, 1.0)
    exp = torchvision.ops.ps_roi_pool(xb, rois, out_size, 1.0)
    assert_same_fwd_bwd(out, exp, xa, xb, go, TOL[torch.float64], TOL[torch.float64])


@requires_torchvision
def test_pool_last_row_deviation_from_torchvision_backward():
    """A box over the whole map: torchvision's forward and mmops ignore the last row and
    column; mmops' gradient is that forward's (torchvision sends some to the last row)."""
    x = torch.randn(1, 1, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[0, 0, 0, 6, 6]], dtype=torch.float64)
    out = mmops.ps_roi_pool(x, rois, 1, 1.0)
    torch.testing.assert_close(out[0, 0, 0, 0], x[0, 0, :5, :5].mean())
    (g,) = torch.autograd.grad(out.sum(), x)
    expected = torch.zeros(6, 6, dtype=torch.float64)
    expected[:5, :5] = 1 / 25
    torch.testing.assert_close(g[0, 0], expected, rtol=0, atol=1e-15)


# --------------------------------------------------------------------------- special inputs


@pytest.mark.parametrize("name", ["align", "pool"])
@pytest.mark.parametrize("shape", [(2, 4, 0, 5), (2, 4, 4, 0)])
def test_empty_feature_map_gives_zeros(name, shape):
    x = torch.randn(*shape, requires_grad=True)
    out = _run(name, x, random_rois(4, 2, 4, 5), (2, 2), 1.0)
    assert torch.equal(out, torch.zeros(4, 1, 2, 2))
    (g,) = torch.autograd.grad(out.sum(), x)
    assert g.shape == shape


@pytest.mark.parametrize("name", ["align", "pool"])
def test_empty_rois_backward(name):
    x = torch.randn(2, 8, 5, 5, requires_grad=True)
    out = _run(name, x, torch.zeros(0, 5), (2, 2), 1.0)
    assert out.shape == (0, 2, 2, 2)
    (g,) = torch.autograd.grad(out.sum(), x)
    assert torch.equal(g, torch.zeros_like(x))


_NONFINITE = [
    [0, 1.0, 1.0, math.nan, 4.0],
    [0, 1.0, 1.0, 4.0, -math.inf],
    [0, -math.inf, 1.0, 4.0, 4.0],
    [0, math.inf, 1.0, 4.0, 4.0],
    [0, 1.0, math.nan, 4.0, 4.0],
]


@pytest.mark.parametrize("name", ["align", "pool"])
def test_nonfinite_roi_coordinates_give_zeros(name):
    x = torch.randn(1, 4, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor(_NONFINITE, dtype=torch.float64)
    out = _run(name, x, rois, (2, 2), 1.0, 2)
    assert torch.equal(out, torch.zeros_like(out))
    (g,) = torch.autograd.grad(out.sum(), x)
    assert torch.equal(g, torch.zeros_like(x))


@pytest.mark.parametrize("name", ["align", "pool"])
def test_huge_coordinates_are_defined(name):
    x = torch.randn(1, 4, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[0, -1e30, -1e30, 1e30, 1e30], [0, 1e20, 1e20, 2e20, 2e20]], dtype=torch.float64)
    out = _run(name, x, rois, (2, 2), 1.0, 2)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, _ref(name, x, rois, (2, 2), 1.0, 2).detach())
    (g,) = torch.autograd.grad(out.sum(), x)
    assert torch.isfinite(g).all()


@pytest.mark.parametrize("name", ["align", "pool"])
def test_reversed_boxes(name):
    """No clamp of ps_roi_align's roi size (negative bins, samples mirrored) and
    max(end - start, 1) for ps_roi_pool: both as the reference."""
    torch.manual_seed(7)
    x = _input(1, 2, 8, 8, (2, 2))
    rois = torch.tensor([[0, 6, 5, 1, 2], [0, 4.2, 4.2, 4.2, 1.0]], dtype=torch.float64)
    for sr in (-1, 1, 2):
        out = _run(name, x, rois, (2, 2), 1.0, sr)
        torch.testing.assert_close(out, _ref(name, x, rois, (2, 2), 1.0, sr))


@pytest.mark.parametrize("name", ["align", "pool"])
def test_noncontiguous_inputs(name):
    torch.manual_seed(8)
    x = _input(2, 2, 9, 10, (2, 2))
    rois = random_rois(12, 2, 9, 10, dtype=torch.float64)
    exp = _run(name, x, rois, (2, 2), 1.0)
    x_cl = x.contiguous(memory_format=torch.channels_last)
    rois_t = rois.t().contiguous().t()
    torch.testing.assert_close(_run(name, x_cl, rois_t, (2, 2), 1.0), exp, rtol=0, atol=0)


def test_backward_helper_checks():
    go = torch.ones(2, 3, 2, 2, dtype=torch.float64)
    rois = torch.tensor([[0, 0, 0, 4, 4]] * 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"ps_roi_align: expected input_shape\[1\] = C_out \* out_h \* out_w = 12"):
        torch.ops.mmops._ps_roi_align_backward(go, rois, [1, 11, 6, 6], 1.0, -1)
    with pytest.raises(RuntimeError, match="ps_roi_pool: .*input_shape"):
        torch.ops.mmops._ps_roi_pool_backward(go, rois, [1, 12, -6, 6], 1.0)
    with pytest.raises(RuntimeError, match="ps_roi_pool: .*rows but rois has"):
        torch.ops.mmops._ps_roi_pool_backward(go, rois[:1], [1, 12, 6, 6], 1.0)
    with pytest.raises(RuntimeError, match="ps_roi_pool: the batch index"):
        torch.ops.mmops._ps_roi_pool_backward(go, rois, [0, 12, 6, 6], 1.0)


@pytest.mark.parametrize("output_size", [[4097, 2], [2, 2**31 + 2], [2**62, 2**62]])
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_huge_output_size_gives_our_error(output_size, device):
    x = torch.randn(1, 4, 6, 6).to(device)
    with pytest.raises(RuntimeError, match="output_size values must be at most 4096"):
        pool_op(x, torch.zeros(1, 5, device=device), output_size, 1.0)


def test_deterministic_across_thread_counts():
    torch.manual_seed(10)
    x = _input(2, 5, 12, 12, (3, 3))
    rois = random_rois(60, 2, 12, 12, dtype=torch.float64)
    go = torch.randn(60, 5, 3, 3, dtype=torch.float64)
    threads = torch.get_num_threads()
    grads = []
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            for name in ("align", "pool"):
                xa = x.clone().requires_grad_(True)
                grads.append(torch.autograd.grad(_run(name, xa, rois, (3, 3), 1.0), xa, go)[0])
    finally:
        torch.set_num_threads(threads)
    for i in range(2, len(grads)):
        assert torch.equal(grads[i], grads[i % 2])


# --------------------------------------------------------------------------- Python API


def test_functional_and_module():
    torch.manual_seed(6)
    x = torch.randn(3, 8, 8, 10)
    boxes = [torch.rand(3, 4) * 16, torch.rand(0, 4), torch.rand(2, 4) * 16]
    rois = torch.cat([torch.cat([torch.full((len(b), 1), float(i)), b], 1) for i, b in enumerate(boxes)])
    out = mmops.ps_roi_align(x, boxes, (2, 2), 0.5, 2)
    torch.testing.assert_close(out, align_op(x, rois, [2, 2], 0.5, 2), rtol=0, atol=0)
    torch.testing.assert_close(mmops.ps_roi_align(x, rois, 2), align_op(x, rois, [2, 2], 1.0, -1), rtol=0, atol=0)
    m = mmops.PSRoIAlign((2, 2), 0.5, 2)
    torch.testing.assert_close(m(x, rois), out, rtol=0, atol=0)
    assert "output_size=(2, 2)" in repr(m) and "sampling_ratio=2" in repr(m)
    out = mmops.ps_roi_pool(x, boxes, (2, 2), 0.5)
    torch.testing.assert_close(out, pool_op(x, rois, [2, 2], 0.5), rtol=0, atol=0)
    torch.testing.assert_close(mmops.PSRoIPool(2, 0.5)(x, rois), out, rtol=0, atol=0)
    assert mmops.PSRoIPool(output_size=(1, 4), spatial_scale=0.25)(x, rois).shape == (5, 2, 1, 4)
    rois[1, 0] = 3.0
    with strict_index_check(True):
        with pytest.raises(RuntimeError, match="batch index"):
            pool_op(x, rois, [2, 2], 1.0)


@pytest.mark.parametrize("name", ["align", "pool"])
def test_autocast_mixed_dtypes(name):
    x = torch.randn(1, 8, 6, 6).bfloat16()
    rois = torch.tensor([[0, 0.5, 0.5, 5.0, 5.0]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = _run(name, x, rois, (2, 2), 1.0)
    # computed in float32, returned in input's dtype (as torchvision's autocast kernels)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, _run(name, x.float(), rois, (2, 2), 1.0).bfloat16(), rtol=0, atol=0)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["align", "pool"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_cuda_backward_is_repeatable_and_matches_cpu(name, dtype):
    torch.manual_seed(12)
    # many overlapping rois, 21 output channels (3 chunks of 8), maps of several tiles
    x = _input(2, 21, 37, 40, (3, 3)).to(dtype)
    rois = random_rois(300, 2, 37, 40, dtype=dtype, spatial_scale=0.5)
    go = torch.randn(300, 21, 3, 3).to(dtype)
    xa = x.clone().requires_grad_(True)
    gexp = torch.autograd.grad(_run(name, xa, rois, (3, 3), 0.5), xa, go)[0]
    grads = []
    for _ in range(3):
        xc = x.cuda().requires_grad_(True)
        grads.append(torch.autograd.grad(_run(name, xc, rois.cuda(), (3, 3), 0.5), xc, go.cuda())[0])
    for g in grads[1:]:
        assert torch.equal(g, grads[0])  # bitwise repeatable, no atomics
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else TOL[dtype]
    torch.testing.assert_close(grads[0].cpu(), gexp, **tol)


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["align", "pool"])
def test_cuda_invalid_batch_index_gives_zeros(name):
    x, rois, bad, go = invalid_batch_index_inputs(13)
    x = torch.cat([x] * 4, 1)  # 12 channels: 3 output channels of 2 x 2 bins
    xc = x.detach().clone().requires_grad_(True)
    out = _run(name, xc, rois, (2, 2), 1.0)
    assert torch.equal(out[bad], torch.zeros_like(out[bad]))
    (g,) = torch.autograd.grad(out, xc, go)
    good = [k for k in range(rois.shape[0]) if k not in bad]
    outg = _run(name, xc, rois[good], (2, 2), 1.0)
    (gg,) = torch.autograd.grad(outg, xc, go[good])
    torch.testing.assert_close(g, gg)
    with strict_index_check(True), pytest.raises(RuntimeError, match="batch index"):
        _run(name, x, rois, (2, 2), 1.0)


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["align", "pool"])
def test_cuda_nonfinite_boxes_equal_cpu(name):
    x = torch.randn(1, 4, 6, 6, dtype=torch.float64)
    rois = torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]] + _NONFINITE, dtype=torch.float64)
    with deterministic_algorithms():
        torch.testing.assert_close(
            _run(name, x.cuda(), rois.cuda(), (2, 2), 1.0).cpu(), _run(name, x, rois, (2, 2), 1.0)
        )
