"""Tests of mmops::prroi_pool: the conformance case, then the float64 reference, known
vectors, gradcheck (input and roi coordinates), special inputs and the CUDA tests."""

import math

import pytest
import torch
from conformance import ConformanceCase, ConformanceSuite, Sample, magnitude_tolerance, roi_pooling_bad_inputs
from conftest import TOL, deterministic_algorithms, random_rois
from prroi_pool_reference import prroi_pool_ref

import mmops

op = torch.ops.mmops.prroi_pool

CASES = [((1, 1, 5, 5), (2, 2)), ((2, 3, 7, 12), (3, 4)), ((3, 2, 11, 9), (7, 5))]


def _grads(x, rois, go, out_size, scale):
    x = x.detach().requires_grad_(True)
    rois = rois.detach().requires_grad_(True)
    out = op(x, rois, list(out_size), scale)
    gx, gr = torch.autograd.grad(out, (x, rois), go)
    return out, gx, gr


def _ref_grads(x, rois, go, out_size, scale):
    x = x.detach().double().requires_grad_(True)
    rois = rois.detach().double().requires_grad_(True)
    out = prroi_pool_ref(x, rois, out_size, scale)
    gx, gr = torch.autograd.grad(out, (x, rois), go.double(), allow_unused=True)
    return out, gx, (gr if gr is not None else torch.zeros_like(rois))


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    (N, C, H, W), K = ((2, 3, 10, 12), 6) if size == 0 else ((3, 4, 14, 9), 9)
    torch.manual_seed(30 + size)
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
    torch.manual_seed(9)
    for scale in (1.0, 0.5, 0.25):
        for (N, C, H, W), out_size in CASES + [((2, 67, 30, 41), (7, 7))]:
            x = torch.randn(N, C, H, W).to(dtype)
            yield Sample((x, random_rois(20, N, H, W, dtype=dtype, spatial_scale=scale), list(out_size), scale))


def _cuda_tol(dtype, what, expected, sample):
    if dtype == torch.float64:
        return dict(rtol=1e-10, atol=1e-10)
    if dtype == torch.float32:
        if what == "grad rois":
            return dict(rtol=1e-4, atol=1e-4)
        return magnitude_tolerance(dtype, what, expected)  # a pixel sums the shares of every bin over it
    return dict(rtol=2e-2, atol=2e-2) if what == "grad rois" else TOL[dtype]


class _Net(torch.nn.Module):
    """prroi_pool in a model: PrRoIPool, the functional wrapper and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.PrRoIPool((3, 2), 0.5)

    def forward(self, x: torch.Tensor, rois: torch.Tensor):
        if torch.jit.is_scripting():  # the functional wrapper is not scriptable
            square = torch.ops.mmops.prroi_pool(x, rois, [2, 2], 0.5)
        else:
            square = mmops.prroi_pool(x, rois, 2, 0.5)
        grown = torch.cat([rois[:, :1], rois[:, 1:] * 1.25], 1)  # computed roi coordinates
        computed = (
            torch.ops.mmops.prroi_pool(x * 1.5, grown, [3, 2], 0.5).sin() + square.mean(dim=(2, 3), keepdim=True)
        ).sum(dim=1)
        net = self.pool(x * 2.0, rois) + torch.ops.mmops.prroi_pool(x, rois, [3, 2], 0.25)
        return computed, net


def _helpers(sample):
    x, rois, out_size, scale = sample.args
    go = torch.randn(rois.shape[0], x.shape[1], *out_size, dtype=x.dtype, device=x.device)
    return [
        (torch.ops.mmops._prroi_pool_input_backward, (go, rois, list(x.shape), scale)),
        (torch.ops.mmops._prroi_pool_rois_backward, (go, x, rois, scale)),
    ]


CONFORMANCE = [
    ConformanceCase(
        "prroi_pool",
        op,
        _sample,
        grad_args=(0, 1),
        feature_args=(0,),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cuda_tol=_cuda_tol,
        bad_inputs=roi_pooling_bad_inputs("prroi_pool"),
    ),
]


class TestPrRoIPoolConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_matches_reference(scale, dtype):
    torch.manual_seed(0)
    for (N, C, H, W), out_size in CASES:
        x = torch.randn(N, C, H, W, dtype=dtype)
        rois = random_rois(10, N, H, W, dtype=dtype, spatial_scale=scale)
        go = torch.randn(10, C, *out_size, dtype=dtype)
        out, gx, gr = _grads(x, rois, go, out_size, scale)
        exp, gx_exp, gr_exp = _ref_grads(x, rois, go, out_size, scale)
        assert exp.abs().sum() > 0 and gx_exp.abs().sum() > 0 and gr_exp.abs().sum() > 0
        tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=1e-5, atol=2e-5)
        torch.testing.assert_close(out, exp.to(dtype), **tol)
        torch.testing.assert_close(gx, gx_exp.to(dtype), **tol)
        roi_tol = tol if dtype == torch.float64 else dict(rtol=1e-4, atol=2e-4)
        torch.testing.assert_close(gr, gr_exp.to(dtype), **roi_tol)
        assert bool((gr[:, 0] == 0).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_against_float32(dtype):
    torch.manual_seed(1)
    x = torch.randn(2, 3, 9, 10).to(dtype)
    rois = random_rois(12, 2, 9, 10, dtype=dtype, spatial_scale=0.5)
    go = torch.randn(12, 3, 3, 3).to(dtype)
    out, gx, gr = _grads(x, rois, go, (3, 3), 0.5)
    exp, gx_exp, gr_exp = _grads(x.float(), rois.float(), go.float(), (3, 3), 0.5)
    assert out.dtype == gx.dtype == gr.dtype == dtype
    torch.testing.assert_close(out.float(), exp, **TOL[dtype])
    torch.testing.assert_close(gx.float(), gx_exp, **TOL[dtype])
    torch.testing.assert_close(gr.float(), gr_exp.to(dtype).float(), rtol=0.05, atol=0.05)


def test_linear_map_gives_the_bin_centre():
    # f(y, x) = 2 y - 3 x + 1 is reproduced exactly by interpolation inside the map, and
    # the mean of a linear function over a rectangle is its value at the centre
    H, W = 8, 9
    y, x = torch.meshgrid(torch.arange(H, dtype=torch.float64), torch.arange(W, dtype=torch.float64), indexing="ij")
    plane = (2 * y - 3 * x + 1)[None, None]
    rois = torch.tensor([[0, 1.0, 0.5, 7.5, 6.8], [0, 2.25, 3.0, 4.75, 3.5]], dtype=torch.float64)
    out = op(plane, rois, [3, 4], 1.0)
    for k in range(2):
        x1, y1, x2, y2 = rois[k, 1:].tolist()
        bw, bh = (x2 - x1) / 4, (y2 - y1) / 3
        for ph in range(3):
            for pw in range(4):
                cy, cx = y1 + bh * (ph + 0.5), x1 + bw * (pw + 0.5)
                assert out[k, 0, ph, pw].item() == pytest.approx(2 * cy - 3 * cx + 1, abs=1e-12)


def test_known_vector_one_pixel():
    # a single 1 at (2, 2): the bin [1.5, 2.5]^2 integrates tent(y - 2) tent(x - 2):
    # (integral_-0.5^0.5 (1 - |u|) du)^2 = 0.75^2 over an area of 1
    x = torch.zeros(1, 1, 5, 5, dtype=torch.float64)
    x[0, 0, 2, 2] = 1
    out = op(x, torch.tensor([[0, 1.5, 1.5, 2.5, 2.5]], dtype=torch.float64), [1, 1], 1.0)
    assert out.item() == pytest.approx(0.5625, abs=1e-15)
    # the whole map: the tent's full integral 1 over 5 x 5 = 1/25 ... minus nothing (inside)
    out = op(x, torch.tensor([[0, 0.0, 0.0, 5.0, 5.0]], dtype=torch.float64), [1, 1], 1.0)
    assert out.item() == pytest.approx(1 / 25, abs=1e-15)


def test_gradcheck_input_and_rois():
    torch.manual_seed(3)
    x = torch.randn(2, 2, 6, 7, dtype=torch.float64, requires_grad=True)
    batch = torch.tensor([[0.0], [1.0], [1.0]], dtype=torch.float64)
    coords = torch.tensor(
        [[0.3, 0.45, 4.1, 5.3], [-1.2, 2.15, 3.3, 7.6], [2.6, 1.1, 8.35, 3.9]], dtype=torch.float64, requires_grad=True
    )  # gradcheck moves the coordinates only: a batch index is no variable

    def pooled(a, c, scale=1.0):
        return op(a, torch.cat([batch, c], 1), [2, 3], scale)

    assert torch.autograd.gradcheck(pooled, (x, coords), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(lambda a, c: pooled(a, c * 2, 0.5), (x, coords), eps=1e-6, atol=1e-6)


def test_degenerate_outside_and_non_finite_rois():
    torch.manual_seed(4)
    x = torch.randn(1, 2, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor(
        [
            [0, 3.0, 1.0, 3.0, 5.0],  # zero width: zeros
            [0, 4.0, 1.0, 2.0, 5.0],  # x2 < x1: zeros
            [0, 20.0, 20.0, 30.0, 30.0],  # beyond the map (and its tents): zeros
            [0, -0.5, -0.5, 0.5, 0.5],  # the corner: zero padding outside
            [0, math.nan, 1.0, 3.0, 4.0],  # NaN: NaN
            [0, 1.0, 1.0, math.inf, 4.0],  # infinite: NaN
        ],
        dtype=torch.float64,
        requires_grad=True,
    )
    out = op(x, rois, [2, 2], 1.0)
    assert (out[:3] == 0).all() and out[4:].isnan().all()
    torch.testing.assert_close(out[3], prroi_pool_ref(x, rois[3:4], (2, 2)).squeeze(0))
    gx, gr = torch.autograd.grad(out[:4].sum(), (x, rois))
    assert gx.abs().sum() > 0 and gr[:3].abs().sum() == 0
    gx, gr = torch.autograd.grad(op(x, rois, [2, 2], 1.0).sum(), (x, rois))
    assert gx.isfinite().all() and gr[4:, 1:].isnan().all() and (gr[:, 0] == 0).all()


def test_boxes_as_list_and_module():
    torch.manual_seed(5)
    x = torch.randn(2, 3, 8, 8)
    boxes = [torch.tensor([[1.0, 1.0, 6.0, 5.0]]), torch.tensor([[0.0, 2.0, 7.0, 7.5], [3.0, 3.0, 4.0, 4.0]])]
    rois = torch.tensor([[0, 1.0, 1.0, 6.0, 5.0], [1, 0.0, 2.0, 7.0, 7.5], [1, 3.0, 3.0, 4.0, 4.0]])
    module = mmops.PrRoIPool(2, 1.0)
    assert "output_size=(2, 2)" in repr(module)
    torch.testing.assert_close(mmops.prroi_pool(x, boxes, 2), op(x, rois, [2, 2], 1.0), rtol=0, atol=0)
    torch.testing.assert_close(module(x, rois), op(x, rois, [2, 2], 1.0), rtol=0, atol=0)


def test_cpu_backward_is_thread_count_independent():
    torch.manual_seed(6)
    x = torch.randn(2, 5, 12, 12, requires_grad=True)
    rois = random_rois(40, 2, 12, 12, spatial_scale=0.5).requires_grad_(True)
    go = torch.randn(40, 5, 3, 3)
    threads = torch.get_num_threads()
    results = []
    try:
        for n in (1, max(threads, 2)):
            torch.set_num_threads(n)
            results.append(torch.autograd.grad(op(x, rois, [3, 3], 0.5), (x, rois), go))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*results):
        assert torch.equal(a, b)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_matches_reference(dtype):
    torch.manual_seed(7)
    x = torch.randn(2, 3, 11, 9, dtype=dtype)
    rois = random_rois(10, 2, 11, 9, dtype=dtype, spatial_scale=0.5)
    go = torch.randn(10, 3, 3, 2, dtype=dtype)
    out, gx, gr = _grads(x.cuda(), rois.cuda(), go.cuda(), (3, 2), 0.5)
    exp, gx_exp, gr_exp = _ref_grads(x, rois, go, (3, 2), 0.5)
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.cpu(), exp.to(dtype), **tol)
    torch.testing.assert_close(gx.cpu(), gx_exp.to(dtype), **tol)
    torch.testing.assert_close(gr.cpu(), gr_exp.to(dtype), **tol)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cuda_deterministic_backward_is_repeatable(dtype):
    torch.manual_seed(8)
    x = torch.randn(2, 16, 32, 32, device="cuda").to(dtype)
    rois = random_rois(300, 2, 32, 32, device="cuda", spatial_scale=0.25).to(dtype)
    go = torch.randn(300, 16, 7, 7, device="cuda").to(dtype)
    with deterministic_algorithms():
        first = torch.ops.mmops._prroi_pool_input_backward(go, rois, list(x.shape), 0.25)
        for _ in range(3):
            assert torch.equal(torch.ops.mmops._prroi_pool_input_backward(go, rois, list(x.shape), 0.25), first)
    loose = torch.ops.mmops._prroi_pool_input_backward(go, rois, list(x.shape), 0.25)
    torch.testing.assert_close(first.float(), loose.float(), **TOL[dtype])


@pytest.mark.cuda
def test_cuda_invalid_batch_index_pools_zeros():
    torch.manual_seed(9)
    x = torch.randn(2, 3, 8, 8, device="cuda")
    rois = random_rois(6, 2, 8, 8, device="cuda")
    rois[[1, 4], 0] = torch.tensor([-1.0, 5.0], device="cuda")
    rois.requires_grad_(True)
    xg = x.clone().requires_grad_(True)
    out = op(xg, rois, [2, 2], 1.0)
    assert (out[[1, 4]] == 0).all()
    gx, gr = torch.autograd.grad(out.sum(), (xg, rois))
    assert (gr[[1, 4]] == 0).all() and gx.isfinite().all()
