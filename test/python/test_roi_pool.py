"""Tests of mmops::roi_pool: the conformance case, then the float64 reference, known
vectors, gradcheck, torchvision, special inputs and the CUDA-specific tests."""

import math

import pytest
import torch
from conformance import ConformanceCase, ConformanceSuite, Sample, roi_pooling_bad_inputs
from conftest import (
    MMCV_ROI_INPUTS,
    TOL,
    assert_same_fwd_bwd,
    deterministic_algorithms,
    invalid_batch_index_inputs,
    random_rois,
    requires_torchvision,
    strict_index_check,
)

import mmops

op = torch.ops.mmops.roi_pool

CASES = [((1, 1, 5, 5), (2, 2)), ((2, 3, 7, 12), (3, 4)), ((3, 5, 20, 9), (7, 5))]


# --------------------------------------------------------------------------- reference


def _round_away(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def _geometry_dtype(dtype):
    # the kernels compute box geometry in float for float32/half/bfloat16, in double for double
    return torch.float64 if dtype == torch.float64 else torch.float32


def _bins(rois, k, out_size, scale, height, width, gdtype):
    """(valid, batch, [(h0, h1)], [(w0, w1)]) of roi k, torchvision's rules, computed
    with plain Python / torch scalars in the kernel's geometry precision."""
    r = rois[k].to(gdtype)
    s = torch.tensor(scale, dtype=gdtype)
    coords = [(r[i] * s).item() for i in range(1, 5)]
    if not all(math.isfinite(c) for c in coords):
        return False, -1, [], []
    x1, y1, x2, y2 = [_round_away(c) for c in coords]
    roi_w, roi_h = max(x2 - x1 + 1, 1), max(y2 - y1 + 1, 1)
    bin_h = torch.tensor(roi_h, dtype=gdtype) / out_size[0]
    bin_w = torch.tensor(roi_w, dtype=gdtype) / out_size[1]

    def ranges(start, binsz, n, size):
        out = []
        for p in range(n):
            b = math.floor((torch.tensor(p, dtype=gdtype) * binsz).item()) + start
            e = math.ceil((torch.tensor(p + 1, dtype=gdtype) * binsz).item()) + start
            out.append((min(max(b, 0), size), min(max(e, 0), size)))
        return out

    return True, None, ranges(y1, bin_h, out_size[0], height), ranges(x1, bin_w, out_size[1], width)


def roi_pool_ref(x, rois, out_size, scale=1.0, grad_out=None):
    """float64 output (and input gradient for grad_out) of torchvision-style roi_pool."""
    N, C, H, W = x.shape
    xd = x.double()
    K = rois.shape[0]
    out = torch.zeros(K, C, *out_size, dtype=torch.float64)
    grad = torch.zeros(N, C, H, W, dtype=torch.float64)
    gdtype = _geometry_dtype(x.dtype)
    for k in range(K):
        valid, _, hr, wr = _bins(rois, k, out_size, scale, H, W, gdtype)
        bval = float(rois[k, 0])
        if not valid or not (0 <= bval < N):
            continue
        b = int(bval)
        for ph, (h0, h1) in enumerate(hr):
            for pw, (w0, w1) in enumerate(wr):
                if h1 <= h0 or w1 <= w0:
                    continue
                region = xd[b, :, h0:h1, w0:w1].reshape(C, -1)
                best = region.max(dim=1).values
                first = (region == best[:, None]).double().argmax(dim=1)  # first maximum
                out[k, :, ph, pw] = best
                if grad_out is not None:
                    rw = w1 - w0
                    for c in range(C):
                        i = int(first[c])
                        grad[b, c, h0 + i // rw, w0 + i % rw] += float(grad_out[k, c, ph, pw])
    return out, grad


def grad_of(x, rois, go, out_size, scale):
    x = x.detach().requires_grad_(True)
    out = op(x, rois, list(out_size), scale)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    (N, C, H, W), K = ((2, 3, 10, 12), 6) if size == 0 else ((3, 4, 14, 9), 9)
    torch.manual_seed(20 + size)
    x = torch.randn(N, C, H, W, dtype=dtype)
    rois = random_rois(K, N, H, W, dtype=dtype, spatial_scale=0.5)
    return Sample((x.to(device), rois.to(device), [2, 3], 0.5))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample((torch.randn(2, 3, 6, 7, **f), torch.zeros(0, 5, **f), [2, 3], 1.0), out_shapes=[(0, 3, 2, 3)]),
        Sample((torch.randn(2, 0, 6, 7, **f), random_rois(4, 2, 6, 7, **f), [2, 3], 1.0), out_shapes=[(4, 0, 2, 3)]),
    ]


def _cuda_samples(dtype):
    """Distinct values (exact in float16; bfloat16 may round some to ties, but CPU and CUDA
    pick the same first maximum of the same rounded values); maps of several tiles and
    channel chunks."""
    torch.manual_seed(9)
    for scale in (1.0, 0.5, 0.25):
        for (N, C, H, W), out_size in CASES + [((2, 67, 30, 41), (7, 7)), ((1, 130, 16, 16), (2, 3))]:
            x = torch.cat([torch.randperm(H * W).double() - H * W / 2 for _ in range(N * C)])
            x = (x.reshape(N, C, H, W) / 4).to(dtype)
            rois = random_rois(20, N, H, W, dtype=dtype, spatial_scale=scale)
            yield Sample((x, rois, list(out_size), scale))


def _cuda_tol(dtype, what, expected, sample):
    if what.startswith("output"):
        return dict(rtol=0, atol=0)  # the maximum is exact
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else TOL[dtype]


class _Net(torch.nn.Module):
    """roi_pool in a model: RoIPool, the functional wrapper and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.RoIPool((3, 2), 0.5)

    def forward(self, x: torch.Tensor, rois: torch.Tensor):
        if torch.jit.is_scripting():  # the functional wrapper is not scriptable
            square = torch.ops.mmops.roi_pool(x, rois, [2, 2], 0.5)
        else:
            square = mmops.roi_pool(x, rois, 2, 0.5)
        computed = (
            torch.ops.mmops.roi_pool(x * 1.5, rois, [3, 2], 0.5).sin() + square.mean(dim=(2, 3), keepdim=True)
        ).sum(dim=1)
        net = self.pool(x * 2.0, rois) + torch.ops.mmops.roi_pool(x, rois, [3, 2], 0.25)
        return computed, net


def _helpers(sample):
    x, rois, out_size, scale = sample.args
    fwd, bwd = torch.ops.mmops._roi_pool_forward, torch.ops.mmops._roi_pool_backward
    out, argmax = fwd(*sample.args)
    return [(fwd, sample.args), (bwd, (torch.randn_like(out), rois, argmax, list(x.shape), scale))]


CONFORMANCE = [
    ConformanceCase(
        "roi_pool",
        op,
        _sample,
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cuda_tol=_cuda_tol,
        bad_inputs=roi_pooling_bad_inputs("roi_pool"),
    ),
]


class TestRoIPoolConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.25])
def test_matches_reference(scale, dtype):
    torch.manual_seed(0)
    for (N, C, H, W), out_size in CASES:
        x = torch.randn(N, C, H, W, dtype=dtype)
        rois = random_rois(12, N, H, W, dtype=dtype, spatial_scale=scale)
        go = torch.randn(12, C, *out_size, dtype=dtype)
        out, g = grad_of(x, rois, go, out_size, scale)
        exp, gexp = roi_pool_ref(x, rois, out_size, scale, go)
        assert exp.abs().sum() > 0 and gexp.abs().sum() > 0
        assert out.dtype == dtype and out.shape == (12, C, *out_size)
        torch.testing.assert_close(out, exp.to(dtype), rtol=0, atol=0)  # max is exact
        torch.testing.assert_close(g, gexp.to(dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_matches_reference(dtype):
    torch.manual_seed(1)
    for (N, C, H, W), out_size in CASES:
        # distinct values exactly representable in the dtype: no ties
        n = N * C * H * W
        vals = (torch.randperm(n).double() - n / 2) / 4 if dtype == torch.float16 else None
        if dtype == torch.bfloat16:  # 8 significant bits: distinct per plane is enough
            vals = torch.cat([torch.randperm(H * W).double() - H * W / 2 for _ in range(N * C)])
        x = vals.reshape(N, C, H, W).to(dtype)
        rois = random_rois(12, N, H, W, dtype=dtype, spatial_scale=0.5)
        go = torch.randn(12, C, *out_size).to(dtype)
        out, g = grad_of(x, rois, go, out_size, 0.5)
        exp, gexp = roi_pool_ref(x, rois, out_size, 0.5, go)
        assert out.dtype == dtype and g.dtype == dtype
        torch.testing.assert_close(out.double(), exp, rtol=0, atol=0)
        torch.testing.assert_close(g.double(), gexp, **TOL[dtype])


# (input, roi, output_size, scale, output, grad of output.sum()), derived by hand
KNOWN = [
    # 4x4 ramp, box over the whole map, 2x2 bins of 2x2 pixels
    (
        torch.arange(16.0).reshape(1, 1, 4, 4),
        [0, 0, 0, 3, 3],
        (2, 2),
        1.0,
        [[5.0, 7.0], [13.0, 15.0]],
        [[0, 0, 0, 0], [0, 1, 0, 1], [0, 0, 0, 0], [0, 1, 0, 1]],
    ),
    # rounding half away from zero: x1=round(0.4)=0, y1=round(0.6)=1, x2=y2=round(2.5)=3
    (
        torch.arange(16.0).reshape(1, 1, 4, 4),
        [0, 0.4, 0.6, 2.5, 2.5],
        (1, 1),
        1.0,
        [[15.0]],
        [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]],
    ),
    # ... and with spatial_scale 0.5: (0.8, 1.2, 5, 5) * 0.5 -> 0.4, 0.6, 2.5, 2.5 -> same box
    (
        torch.arange(16.0).reshape(1, 1, 4, 4),
        [0, 0.8, 1.2, 5, 5],
        (1, 1),
        0.5,
        [[15.0]],
        [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]],
    ),
    # one-pixel box, 3x3 output: every bin is that pixel (gradient 9)
    (
        torch.arange(16.0).reshape(1, 1, 4, 4),
        [0, 1, 2, 1, 2],
        (3, 3),
        1.0,
        [[9.0] * 3] * 3,
        [[0, 0, 0, 0], [0, 0, 0, 0], [0, 9, 0, 0], [0, 0, 0, 0]],
    ),
    # box outside the map: empty bins -> 0, no gradient
    (torch.arange(16.0).reshape(1, 1, 4, 4), [0, 10, 10, 12, 12], (2, 2), 1.0, [[0.0, 0.0], [0.0, 0.0]], [[0] * 4] * 4),
    # negative values, box partly outside: 5x5 box from (-3, -3), bins 5 x 2.5 wide: the left
    # bin covers x in [-3, 0) (outside: empty, 0), the right one x in [-1, 2) -> clamped to
    # [0, 2), y in [0, 2): max -1 (no 0 floor)
    (
        -torch.arange(1.0, 17.0).reshape(1, 1, 4, 4),
        [0, -3, -3, 1, 1],
        (1, 2),
        1.0,
        [[0.0, -1.0]],
        [[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
    ),
    # ties: the first maximum (row-major) wins
    (
        torch.zeros(1, 1, 4, 4),
        [0, 1, 1, 2, 2],
        (1, 1),
        1.0,
        [[0.0]],
        [[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
    ),
]


# mmcv's tests/test_ops/test_roi_pool.py: 2x2 output, spatial_scale 1; gradients of output.sum()
MMCV_EXPECTED = [  # (output, input gradient) of each of MMCV_ROI_INPUTS
    ([[[[1.0, 2.0], [3.0, 4.0]]]], [[[[1.0, 1.0], [1.0, 1.0]]]]),
    (
        [[[[1.0, 2.0], [3.0, 4.0]], [[4.0, 3.0], [2.0, 1.0]]]],
        [[[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]]],
    ),
    (
        [[[[4.0, 8.0], [12.0, 16.0]]]],
        [[[[0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0]]]],
    ),
]
MMCV_VECTORS = [(inp, roi, out, grad) for (inp, roi), (out, grad) in zip(MMCV_ROI_INPUTS, MMCV_EXPECTED)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(MMCV_VECTORS)))
def test_mmcv_known_vectors(case, dtype):
    inp, roi, out, grad = MMCV_VECTORS[case]
    x = torch.tensor(inp, dtype=dtype, requires_grad=True)
    y = mmops.RoIPool((2, 2), 1.0)(x, torch.tensor(roi, dtype=dtype))
    y.sum().backward()
    torch.testing.assert_close(y, torch.tensor(out, dtype=dtype), rtol=0, atol=0)
    torch.testing.assert_close(x.grad, torch.tensor(grad, dtype=dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(KNOWN)))
def test_known_vectors(case, dtype):
    inp, roi, out_size, scale, out, grad = KNOWN[case]
    x = inp.detach().clone().to(dtype).requires_grad_(True)
    y = op(x, torch.tensor([roi], dtype=dtype), list(out_size), scale)
    y.sum().backward()
    torch.testing.assert_close(y, torch.tensor(out, dtype=dtype)[None, None], rtol=0, atol=0)
    torch.testing.assert_close(x.grad, torch.tensor(grad, dtype=dtype)[None, None], rtol=0, atol=0)


def test_reference_reproduces_known_vectors():
    for inp, roi, out_size, scale, out, grad in KNOWN:
        exp, gexp = roi_pool_ref(
            inp.double(), torch.tensor([roi], dtype=torch.float64), out_size, scale, torch.ones(1, 1, *out_size)
        )
        torch.testing.assert_close(exp, torch.tensor(out, dtype=torch.float64)[None, None])
        torch.testing.assert_close(gexp, torch.tensor(grad, dtype=torch.float64)[None, None])


def test_argmax_of_helper_op():
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    out, argmax = torch.ops.mmops._roi_pool_forward(
        x, torch.tensor([[0, 0, 0, 3, 3.0], [0, 9, 9, 12, 12.0]]), [2, 2], 1.0
    )
    assert argmax.dtype == torch.int32
    assert argmax[0, 0].tolist() == [[5, 7], [13, 15]]
    assert argmax[1, 0].tolist() == [[-1, -1], [-1, -1]]


# --------------------------------------------------------------------------- gradcheck


def test_gradcheck():
    torch.manual_seed(2)
    H, W = 9, 11
    # well separated values (steps of 0.25 >> eps): no argmax flips under finite differences
    x = (torch.randperm(2 * 3 * H * W, dtype=torch.float64).reshape(2, 3, H, W) / 4.0).requires_grad_(True)
    rois = torch.tensor(
        [[0, 0.9, 1.2, 8.3, 7.4], [1, 2.1, 0.8, 4.2, 3.3], [1, -2, -1, 12, 10], [0, 5, 5, 5, 5]], dtype=torch.float64
    )
    assert torch.autograd.gradcheck(lambda t: op(t, rois, [3, 2], 1.0), (x,), check_batched_grad=False)
    assert torch.autograd.gradcheck(lambda t: mmops.roi_pool(t, rois, 2, 0.5), (x,), check_batched_grad=False)


def test_double_backward_raises():
    x = torch.randn(1, 2, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = random_rois(4, 1, 6, 6, dtype=torch.float64)
    out = op(x, rois, [2, 2], 1.0)
    go = torch.randn_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        (g,) = torch.autograd.grad(out, x, go, create_graph=True)
        torch.autograd.grad(g.sum(), (x, go))


# --------------------------------------------------------------------------- torchvision


@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.25, 0.125])
def test_matches_torchvision(scale, dtype):
    import torchvision

    torch.manual_seed(3)
    for (N, C, H, W), out_size in CASES + [((2, 4, 25, 42), (7, 7))]:
        x = torch.randn(N, C, H, W, dtype=dtype)
        rois = random_rois(16, N, H, W, dtype=dtype, spatial_scale=scale)
        go = torch.randn(16, C, *out_size, dtype=dtype)
        xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        out = op(xa, rois, list(out_size), scale)
        exp = torchvision.ops.roi_pool(xb, rois, out_size, scale)
        assert_same_fwd_bwd(out, exp, xa, xb, go, dict(rtol=0, atol=0), TOL[dtype])


# --------------------------------------------------------------------------- special inputs


@pytest.mark.parametrize("shape", [(2, 3, 0, 5), (2, 3, 4, 0)])
def test_empty_feature_map_gives_zeros(shape):
    x = torch.randn(*shape, requires_grad=True)
    out = op(x, random_rois(4, 2, 4, 5), [2, 2], 1.0)
    assert torch.equal(out, torch.zeros(4, 3, 2, 2))
    (g,) = torch.autograd.grad(out.sum(), x)
    assert g.shape == shape


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonfinite_roi_coordinates_give_zeros(bad):
    torch.manual_seed(4)
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64, requires_grad=True)
    rois = random_rois(8, 2, 8, 8, dtype=torch.float64)
    for row, col in ((0, 1), (1, 2), (2, 3), (3, 4)):
        rois[row, col] = bad
    out = op(x, rois, [2, 2], 1.0)
    assert torch.equal(out[:4], torch.zeros_like(out[:4]))
    go = torch.randn_like(out)
    (g,) = torch.autograd.grad(out, x, go)
    exp, gexp = roi_pool_ref(x, rois[4:], (2, 2), 1.0, go[4:])
    torch.testing.assert_close(out[4:], exp)
    torch.testing.assert_close(g, gexp)


def test_huge_coordinates_are_clamped():
    x = torch.randn(1, 2, 8, 8, dtype=torch.float64)
    rois = torch.tensor([[0, -1e30, -1e30, 1e30, 1e30]], dtype=torch.float64)
    out = op(x, rois, [1, 1], 1.0)
    # the box covers the map and much more; the first bins hold the whole map
    assert torch.isfinite(out).all()
    out2 = op(x, rois, [2, 2], 1.0)
    exp, _ = roi_pool_ref(
        x, torch.tensor([[0, -(2.0**24), -(2.0**24), 2.0**24, 2.0**24]], dtype=torch.float64), (2, 2), 1.0
    )
    torch.testing.assert_close(out2, exp)


def test_nan_in_input_propagates():
    x = torch.randn(1, 1, 6, 6, dtype=torch.float64)
    x[0, 0, 1, 1] = math.nan
    rois = torch.tensor([[0, 0, 0, 5, 5]], dtype=torch.float64)
    out = op(x, rois, [2, 2], 1.0)
    assert math.isnan(out[0, 0, 0, 0])  # the bin holding the NaN (as torch.amax)
    assert torch.isfinite(out[0, 0].flatten()[1:]).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_cpu_plane_and_channels_last_paths_agree(dtype):
    # The CPU forward scans an NCHW input plane by plane when the rois read less
    # than the map (each roi alone below: at most one of the two images), else a
    # channels-last copy, vectorised over channels (all rois together, or a
    # channels_last input). Same values and argmax, ties (first pixel), NaN
    # (first NaN), -inf and -0.0 included; float64 against the reference.
    torch.manual_seed(21)
    N, C, H, W = 2, 13, 17, 23
    x = torch.randint(-3, 3, (N, C, H, W)).double()
    x[0, 0] = -0.0
    x[1, 1] = -math.inf
    x[0, 2, 3:15, 2:20:5] = math.nan
    x = x.to(dtype)
    rois = torch.cat(
        [random_rois(40, N, H, W, dtype=torch.float64), torch.tensor([[1, 0.0, 0.0, W - 1.0, H - 1.0]])]
    ).to(dtype)
    for out_size in ((3, 4), (1, 1)):
        together, arg = torch.ops.mmops._roi_pool_forward(x, rois, list(out_size), 1.0)
        for k in range(rois.shape[0]):
            for xin in (x, x.contiguous(memory_format=torch.channels_last)):
                alone, arg_k = torch.ops.mmops._roi_pool_forward(xin, rois[k : k + 1], list(out_size), 1.0)
                torch.testing.assert_close(alone[0], together[k], rtol=0, atol=0, equal_nan=True)
                assert torch.equal(arg_k[0], arg[k])
        if dtype == torch.float64:
            exp, _ = roi_pool_ref(x, rois, out_size)
            torch.testing.assert_close(together, exp, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("layout", ["transposed", "channels_last", "sliced"])
def test_noncontiguous_input(layout):
    torch.manual_seed(5)
    x = torch.randn(2, 3, 8, 10)
    if layout == "transposed":
        xv = torch.empty(2, 3, 10, 8).transpose(2, 3)
        xv.copy_(x)
    elif layout == "channels_last":
        xv = x.to(memory_format=torch.channels_last)
    else:
        xv = torch.empty(2, 6, 8, 20)[:, ::2, :, ::2]
        xv.copy_(x)
    rois = random_rois(9, 2, 8, 10, spatial_scale=0.5)
    rois_nc = torch.empty(5, 9).t()
    rois_nc.copy_(rois)
    go = torch.randn(9, 3, 3, 2)
    exp, gexp = grad_of(x, rois, go, (3, 2), 0.5)
    out, g = grad_of(xv, rois_nc, go, (3, 2), 0.5)
    torch.testing.assert_close(out, exp, rtol=0, atol=0)
    torch.testing.assert_close(g, gexp, rtol=0, atol=0)
    go_t = torch.empty(2, 3, 3, 9).permute(3, 1, 2, 0)
    go_t.copy_(go)
    assert not go_t.is_contiguous()
    _, g2 = grad_of(x, rois, go_t, (3, 2), 0.5)
    torch.testing.assert_close(g2, gexp, rtol=0, atol=0)


# --------------------------------------------------------------------------- errors


def _good():
    return torch.randn(2, 3, 6, 6), random_rois(4, 2, 6, 6)


@pytest.mark.parametrize("batch_index", [-1.0, 2.0, 7.0, math.nan])
def test_bad_batch_index_raises_in_helper_op_on_cpu(batch_index):
    x, rois = _good()
    rois[2, 0] = batch_index
    with pytest.raises(RuntimeError, match="batch index"):
        torch.ops.mmops._roi_pool_forward(x, rois, [2, 2], 1.0)


def test_backward_helper_checks():
    x, rois = _good()
    out, argmax = torch.ops.mmops._roi_pool_forward(x, rois, [2, 2], 1.0)
    bwd = torch.ops.mmops._roi_pool_backward
    with pytest.raises(RuntimeError, match="argmax"):
        bwd(out, rois, argmax.long(), list(x.shape), 1.0)
    with pytest.raises(RuntimeError, match="argmax"):
        bwd(out, rois, argmax[:, :, :1], list(x.shape), 1.0)
    with pytest.raises(RuntimeError, match="channels"):
        bwd(out, rois, argmax, [2, 5, 6, 6], 1.0)
    # argmax values outside the plane are ignored (never an out-of-bounds write)
    g = bwd(torch.ones_like(out), rois, torch.full_like(argmax, 1000), list(x.shape), 1.0)
    assert torch.equal(g, torch.zeros_like(x))


# --------------------------------------------------------------------------- Python API


def test_functional_and_module():
    torch.manual_seed(6)
    x = torch.randn(3, 3, 8, 10)
    boxes = [torch.rand(3, 4) * 16, torch.rand(0, 4), torch.rand(2, 4) * 16]
    rois = torch.cat([torch.cat([torch.full((len(b), 1), float(i)), b], 1) for i, b in enumerate(boxes)])
    out = mmops.roi_pool(x, boxes, (3, 2), 0.5)
    torch.testing.assert_close(out, op(x, rois, [3, 2], 0.5), rtol=0, atol=0)
    torch.testing.assert_close(mmops.roi_pool(x, rois, 3), op(x, rois, [3, 3], 1.0), rtol=0, atol=0)
    m = mmops.RoIPool((3, 2), 0.5)
    torch.testing.assert_close(m(x, rois), out, rtol=0, atol=0)
    assert "output_size=(3, 2)" in repr(m) and "0.5" in repr(m)
    m2 = mmops.RoIPool(output_size=4, spatial_scale=0.25)
    assert m2(x, rois).shape == (5, 3, 4, 4)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_large_map_ties_and_nan_match_cpu(dtype, layout):
    # Bins spanning several 16x16 tiles of the CUDA kernel, 2 channel chunks, many rois:
    # per-tile maxima must merge into exactly the sequential scan's result, including
    # ties across tiles (first pixel wins), NaN (first NaN wins), -inf and -0.0.
    torch.manual_seed(13)
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    N, C, H, W = 2, 45, 53, 71
    x = torch.randint(-3, 3, (N, C, H, W)).double()  # many ties
    x[0, 0] = -0.0
    x[1, 1] = -math.inf
    x[0, 2, 10:40, 5:60:7] = math.nan
    x[1, 3, 3::9, 2::5] = math.nan
    x = x.to(dtype)
    rois = torch.cat(
        [
            random_rois(60, N, H, W, dtype=torch.float64, spatial_scale=0.5),
            torch.tensor([[0, 0.0, 0.0, 2 * W, 2 * H], [1, 8.0, 30.0, 130.0, 90.0]]),
        ]
    ).to(dtype)
    for out_size in ((7, 7), (3, 5), (1, 1)):
        out, arg = torch.ops.mmops._roi_pool_forward(
            x.cuda().contiguous(memory_format=fmt), rois.cuda(), list(out_size), 0.5
        )
        exp, earg = torch.ops.mmops._roi_pool_forward(x, rois, list(out_size), 0.5)
        assert torch.equal(arg.cpu(), earg)
        torch.testing.assert_close(out.cpu(), exp, rtol=0, atol=0, equal_nan=True)
        plain = op(x.cuda().contiguous(memory_format=fmt), rois.cuda(), list(out_size), 0.5)
        torch.testing.assert_close(plain.cpu(), exp, rtol=0, atol=0, equal_nan=True)
        go = torch.randn(exp.shape).to(dtype)
        _, g = grad_of(x.cuda().contiguous(memory_format=fmt), rois.cuda(), go.cuda(), out_size, 0.5)
        _, gexp = grad_of(x, rois, go, out_size, 0.5)
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else TOL[dtype]
        torch.testing.assert_close(g.cpu(), gexp, **tol)


@pytest.mark.cuda
def test_cuda_argmax_matches_cpu():
    torch.manual_seed(10)
    x = torch.randn(2, 40, 13, 17)
    rois = random_rois(15, 2, 13, 17, spatial_scale=0.5)
    out, arg = torch.ops.mmops._roi_pool_forward(x.cuda(), rois.cuda(), [3, 4], 0.5)
    exp, earg = torch.ops.mmops._roi_pool_forward(x, rois, [3, 4], 0.5)
    assert torch.equal(out.cpu(), exp) and torch.equal(arg.cpu(), earg)


@pytest.mark.cuda
def test_cuda_invalid_batch_index_gives_zeros():
    x, rois, bad, go = invalid_batch_index_inputs(seed=11)
    with strict_index_check(False):
        out, g = grad_of(x, rois, go, (2, 2), 1.0)
    assert torch.equal(out[bad], torch.zeros_like(out[bad]))
    good = [i for i in range(8) if i not in bad]
    exp, gexp = grad_of(x.cpu(), rois[good].cpu(), go[good].cpu(), (2, 2), 1.0)
    torch.testing.assert_close(out[good].cpu(), exp)
    torch.testing.assert_close(g.cpu(), gexp)


@pytest.mark.cuda
def test_cuda_strict_index_check_raises():
    x = torch.randn(2, 3, 8, 8, device="cuda")
    rois = random_rois(4, 2, 8, 8, device="cuda")
    rois[1, 0] = 2.0
    with strict_index_check(True):
        with pytest.raises(RuntimeError, match="batch index"):
            op(x, rois, [2, 2], 1.0)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_cuda_deterministic_backward(dtype):
    torch.manual_seed(12)
    # many overlapping rois: many adds into the same pixels, in racing order
    x = torch.randn(2, 70, 20, 24).to(dtype)
    rois = random_rois(300, 2, 20, 24, dtype=dtype)
    go = torch.randn(300, 70, 3, 3).to(dtype)
    _, gexp = grad_of(x, rois, go, (3, 3), 1.0)
    with deterministic_algorithms():
        grads = [grad_of(x.cuda(), rois.cuda(), go.cuda(), (3, 3), 1.0)[1] for _ in range(3)]
    for g in grads[1:]:
        assert torch.equal(g, grads[0])  # bitwise repeatable
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else TOL[dtype]
    torch.testing.assert_close(grads[0].cpu(), gexp, **tol)
    # a non-finite grad_output makes the whole gradient NaN (no fixed point for it)
    go_bad = go.clone()
    go_bad[0, 0, 0, 0] = math.inf
    with deterministic_algorithms():
        g = grad_of(x.cuda(), rois.cuda(), go_bad.cuda(), (3, 3), 1.0)[1]
    assert torch.isnan(g).all()


# ---- hardening (issue 11): bounded output_size, checked input_shape, non-finite rois ----

_PX = torch.randn(1, 2, 6, 6, dtype=torch.float64)
_PROIS = torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]], dtype=torch.float64)


@pytest.mark.parametrize("output_size", [[4097, 2], [2, 2**31 + 2], [2**32 + 1, 1], [2**62, 2**62]])
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_huge_output_size_gives_our_error(output_size, device):
    with pytest.raises(RuntimeError, match="output_size values must be at most 4096"):
        op(_PX.to(device), _PROIS.to(device), output_size, 1.0)


def test_output_numel_overflow_gives_our_error():
    x = torch.empty(1, 2**40, 0, 0, device="meta")
    with pytest.raises(RuntimeError, match="output_size too large"):
        op(x, torch.empty(2**40, 5, device="meta"), [4096, 4096], 1.0)


@pytest.mark.parametrize("input_shape", [(1, 2, -6, 6), (-1, 2, 6, 6), (2**62, 2, 6, 6)])
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_backward_input_shape_checked(input_shape, device):
    g = torch.ones(1, 2, 2, 2, dtype=torch.float64, device=device)
    argmax = torch.zeros(g.shape, dtype=torch.int32, device=device)
    with pytest.raises(RuntimeError, match="input_shape"):
        torch.ops.mmops._roi_pool_backward(g, _PROIS.to(device), argmax, list(input_shape), 1.0)


_POOL_NONFINITE = [
    [0, 1.0, 1.0, math.nan, 4.0],
    [0, 1.0, 1.0, 4.0, -math.inf],
    [0, 1.0, 1.0, -math.inf, 4.0],
    [0, math.inf, 1.0, 4.0, 4.0],
    [0, 1.0, math.nan, 4.0, 4.0],
]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("deterministic", [False, True])
def test_cuda_nonfinite_x2_y2_equal_cpu(dtype, deterministic):
    import contextlib

    x = torch.randn(1, 3, 6, 6, dtype=torch.float64).to(dtype).requires_grad_()
    rois = torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]] + _POOL_NONFINITE, dtype=torch.float64).to(dtype)
    xc = x.detach().cuda().requires_grad_()
    out = op(x, rois, [2, 2], 1.0)
    (g,) = torch.autograd.grad(out.float().sum(), x)
    with deterministic_algorithms() if deterministic else contextlib.nullcontext():
        outc = op(xc, rois.cuda(), [2, 2], 1.0)
        (gc,) = torch.autograd.grad(outc.float().sum(), xc)
    assert torch.equal(outc[1:].cpu(), torch.zeros_like(out[1:]))
    assert torch.equal(outc.cpu(), out)  # max of the same values: exact
    torch.testing.assert_close(gc.cpu(), g, rtol=0, atol=0)
