"""Tests of mmops::corner_pool: the conformance cases, then the float64 reference written from
the definition, mmcv's known vectors, the tie and NaN rule, mmcv 2.x's cummax composite,
gradcheck, channels_last, CUDA == CPU and the mmcv bridge."""

import importlib
import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from corner_pool_reference import corner_pool_composite, corner_pool_grad_ref, corner_pool_ref

import mmops

op = torch.ops.mmops.corner_pool
MODES = ["top", "bottom", "left", "right"]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


# --------------------------------------------------------------------------- conformance


def _sample_of(mode):
    def sample(device, dtype, size):
        shape = (2, 3, 5, 7) if size == 0 else (3, 4, 8, 6)
        g = torch.Generator().manual_seed(60 + size)
        x = torch.randn(*shape, dtype=torch.float64, generator=g).to(dtype)
        return Sample((x.to(device), mode))

    return sample


def _empty_of(mode):
    def empty(device, dtype):
        f = dict(dtype=dtype, device=device)
        shapes = [(0, 3, 4, 5), (2, 0, 4, 5), (2, 3, 0, 5), (2, 3, 4, 0)]
        return [Sample((torch.randn(*s, **f), mode), out_shapes=[s]) for s in shapes]

    return empty


class _Net(torch.nn.Module):
    """CornerNet's pooling head in miniature: the module, the wrapper and the op."""

    def __init__(self):
        super().__init__()
        self.top = mmops.CornerPool("top")
        self.left = mmops.CornerPool("left")

    def forward(self, x: torch.Tensor):
        tl = self.top(x * 2.0) + self.left(x.sin())
        return tl, mmops.corner_pool(x, "bottom") * torch.ops.mmops.corner_pool(x, "right")


def _helpers(sample):
    x, mode = sample.args
    return [(torch.ops.mmops._corner_pool_backward, (torch.randn_like(x), x, mode))]


def _message(text):
    return f"mmops::corner_pool: .*{text}"


def _case(mode):
    return ConformanceCase(
        f"corner_pool_{mode}",
        op,
        _sample_of(mode),
        grad_args=(0,),
        feature_args=(0,),
        channels_last_output=True,
        nonzero_grads=True,
        empty=_empty_of(mode),
        module=_Net if mode == "top" else None,
        helpers=_helpers,
        bad_inputs={
            "input_3d": BadInput(lambda x, m: (x[0], m), _message("expected input to be a 4-D tensor"), meta=True),
            "input_5d": BadInput(lambda x, m: (x[None], m), _message("expected input to be a 4-D tensor"), meta=True),
            "int_input": BadInput(lambda x, m: (x.int(), m), _message("expected input to have a floating"), meta=True),
            "mode": BadInput(lambda x, m: (x, "corner"), _message('mode must be "top", "bottom", "left" or "right"')),
            "mode_case": BadInput(lambda x, m: (x, m.upper()), _message("mode must be"), meta=True),
        },
    )


CONFORMANCE = [_case(m) for m in MODES]


class TestCornerPoolConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def grad_of(x, mode, go):
    x = x.detach().requires_grad_(True)
    out = op(x, mode)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


def small_ints(shape, generator, low=-4, high=5):
    """Integer-valued gradients: every sum is exact in every dtype, so results compare exactly."""
    return torch.randint(low, high, shape, generator=generator).double()


# (N, C, H, W): a single pixel, single rows / columns, odd sizes, W across the CUDA tile width
# (32 float32 / 64 16-bit / 16 float64 columns)
SHAPES = [(1, 1, 1, 1), (2, 3, 1, 9), (2, 3, 9, 1), (2, 3, 5, 7), (1, 2, 13, 70), (3, 2, 33, 17)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", list(FORMATS))
def test_matches_reference(mode, dtype, layout):
    g = torch.Generator().manual_seed(1)
    for shape in SHAPES:
        for ties in (False, True):
            # with ties: few distinct values, so the tie rule decides most argmaxes
            x = torch.randint(-3, 4, shape, generator=g).double() if ties else torch.randn(shape, generator=g)
            x = x.to(dtype).contiguous(memory_format=FORMATS[layout])
            go = small_ints(shape, g).to(dtype)
            out, grad = grad_of(x, mode, go)
            assert out.dtype == dtype and out.shape == x.shape
            assert out.is_contiguous(memory_format=FORMATS[layout]) and grad.is_contiguous(
                memory_format=FORMATS[layout]
            )
            # copies of input values and sums of small integers: exact in every dtype
            torch.testing.assert_close(out.double(), corner_pool_ref(x, mode), rtol=0, atol=0)
            torch.testing.assert_close(grad.double(), corner_pool_grad_ref(x, mode, go), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_random_gradients_match_reference(dtype):
    g = torch.Generator().manual_seed(2)
    for mode in MODES:
        x = torch.randn(2, 3, 11, 40, generator=g, dtype=dtype)
        go = torch.randn(2, 3, 11, 40, generator=g, dtype=dtype)
        _, grad = grad_of(x, mode, go)
        tol = dict(rtol=1e-6, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(grad.double(), corner_pool_grad_ref(x, mode, go), **tol)


# mmcv's tests/test_ops/test_corner_pool.py (int64 there; the same values in floating point here)
MMCV_LR = [[[[0, 0, 0, 0, 0], [2, 1, 3, 0, 2], [5, 4, 1, 1, 6], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]]]
MMCV_TB = [[[[0, 3, 1, 0, 0], [0, 1, 1, 0, 0], [0, 3, 4, 0, 0], [0, 2, 2, 0, 0], [0, 0, 2, 0, 0]]]]
MMCV_ANSWERS = {
    "left": (MMCV_LR, [[[[0, 0, 0, 0, 0], [3, 3, 3, 2, 2], [6, 6, 6, 6, 6], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]]]),
    "right": (MMCV_LR, [[[[0, 0, 0, 0, 0], [2, 2, 3, 3, 3], [5, 5, 5, 5, 6], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]]]),
    "top": (MMCV_TB, [[[[0, 3, 4, 0, 0], [0, 3, 4, 0, 0], [0, 3, 4, 0, 0], [0, 2, 2, 0, 0], [0, 0, 2, 0, 0]]]]),
    "bottom": (MMCV_TB, [[[[0, 3, 1, 0, 0], [0, 3, 1, 0, 0], [0, 3, 4, 0, 0], [0, 3, 4, 0, 0], [0, 3, 4, 0, 0]]]]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_mmcv_known_vectors(mode, dtype, device):
    x, answer = (torch.tensor(v, dtype=dtype, device=device) for v in MMCV_ANSWERS[mode])
    for layout in FORMATS.values():
        out = mmops.CornerPool(mode)(x.contiguous(memory_format=layout))
        assert out.dtype == dtype and torch.equal(out, answer)
    torch.testing.assert_close(corner_pool_ref(x.cpu(), mode), answer.cpu().double(), rtol=0, atol=0)


def test_tie_rule_nearest_position():
    """Equal maxima: the gradient goes to the one nearest to the output (torch.cummax's rule
    along the scan; mmcv 1.x's kernels took the farthest)."""
    x = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0], dtype=torch.float64)
    go = torch.tensor([1.0, 10.0, 100.0, 1000.0, 10000.0], dtype=torch.float64)
    # right: out[w] = max over w' <= w; argmaxes 0, 1, 2, 2, 4
    # left:  out[w] = max over w' >= w; argmaxes 1, 1, 2, 4, 4
    expected = {"right": [1.0, 10.0, 1100.0, 0.0, 10000.0], "left": [0.0, 11.0, 100.0, 0.0, 11000.0]}
    for mode, grad in expected.items():
        for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
            out, g = grad_of(x.view(1, 1, 1, 5).to(device), mode, go.view(1, 1, 1, 5).to(device))
            assert g.flatten().tolist() == grad, (mode, device)
            # the same along H (bottom mirrors right, top mirrors left)
            other = {"right": "bottom", "left": "top"}[mode]
            out, g = grad_of(x.view(1, 1, 5, 1).to(device), other, go.view(1, 1, 5, 1).to(device))
            assert g.flatten().tolist() == grad, (other, device)


def test_signed_zeros_follow_the_tie_rule():
    # 0.0 == -0.0: the nearest one is the output, sign included (as cummax)
    x = torch.tensor([0.0, -0.0, 0.0, -0.0]).view(1, 1, 1, 4)
    assert torch.signbit(op(x, "right")).flatten().tolist() == [False, True, False, True]
    assert torch.signbit(op(x, "left")).flatten().tolist() == [False, True, False, True]
    assert torch.equal(torch.signbit(op(x, "right")), torch.signbit(corner_pool_composite(x, "right")))


def test_nan_propagates_and_takes_the_gradient():
    nan = math.nan
    x = torch.tensor([1.0, nan, 2.0, nan, 0.0]).view(1, 1, 1, 5)
    go = torch.tensor([1.0, 10.0, 100.0, 1000.0, 10000.0]).view(1, 1, 1, 5)
    out, g = grad_of(x, "right", go)  # argmaxes 0, 1, 1, 3, 3
    torch.testing.assert_close(out, torch.tensor([1.0, nan, nan, nan, nan]).view(1, 1, 1, 5), equal_nan=True)
    assert g.flatten().tolist() == [1.0, 110.0, 0.0, 11000.0, 0.0]
    out, g = grad_of(x, "left", go)  # argmaxes 1, 1, 3, 3, 4
    torch.testing.assert_close(out, torch.tensor([nan, nan, nan, nan, 0.0]).view(1, 1, 1, 5), equal_nan=True)
    assert g.flatten().tolist() == [0.0, 11.0, 0.0, 1100.0, 10000.0]


def test_infinities():
    inf = math.inf
    x = torch.tensor([-inf, -inf, 1.0, inf, -inf, inf]).view(1, 1, 6, 1)
    out, g = grad_of(x, "bottom", torch.ones_like(x))  # argmaxes 0, 1, 2, 3, 3, 5
    assert out.flatten().tolist() == [-inf, -inf, 1.0, inf, inf, inf]
    assert g.flatten().tolist() == [1.0, 1.0, 1.0, 2.0, 0.0, 1.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_equals_mmcv2_cummax_composite(dtype):
    """mmcv 2.x's CornerPool (cummax of the flipped tensor): the same outputs and gradients,
    with many ties and NaNs."""
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-2, 3, (2, 3, 9, 12), generator=g).double()
    x[torch.rand(x.shape, generator=g) < 0.05] = math.nan
    x = x.to(dtype)
    go = small_ints(x.shape, g).to(dtype)
    for mode in MODES:
        out, grad = grad_of(x, mode, go)
        xc = x.detach().requires_grad_(True)
        exp = corner_pool_composite(xc, mode)
        (gexp,) = torch.autograd.grad(exp, xc, go)
        torch.testing.assert_close(out, exp, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(grad, gexp, rtol=0, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck(mode):
    # distinct values: no ties, so the argmax does not move under the finite differences
    g = torch.Generator().manual_seed(4)
    x = (torch.randperm(2 * 3 * 5 * 6, generator=g).double() / 7).view(2, 3, 5, 6).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: op(t, mode), (x,))
    assert torch.autograd.gradcheck(lambda t: op(t.contiguous(memory_format=torch.channels_last), mode), (x,))


def test_strided_input():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 6, 5, 14, generator=g)[:, ::2, :, ::2]
    assert not x.is_contiguous()
    for mode in MODES:
        go = torch.randn(x.shape, generator=g)
        out, grad = grad_of(x, mode, go)
        out_c, grad_c = grad_of(x.contiguous(), mode, go)
        assert torch.equal(out, out_c) and torch.equal(grad, grad_c)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 5, 4, 6), (2, 37, 9, 11)])
def test_output_gradient_in_the_other_layout(dtype, shape):
    # the output gradient in another layout than the input (the CPU converts it
    # with a tiled transpose: 37 x 99 planes have ragged tiles): the result does not change
    g = torch.Generator().manual_seed(6)
    x = torch.randn(shape, generator=g).to(dtype)
    go = torch.randn(shape, generator=g).to(dtype)
    x_cl, go_cl = (t.contiguous(memory_format=torch.channels_last) for t in (x, go))
    for mode in MODES:
        _, grad = grad_of(x, mode, go)
        _, grad_cl = grad_of(x_cl, mode, go)
        assert grad_cl.is_contiguous(memory_format=torch.channels_last) and torch.equal(grad_cl, grad)
        _, grad_nchw = grad_of(x, mode, go_cl)
        assert grad_nchw.is_contiguous() and torch.equal(grad_nchw, grad)
        _, grad_same = grad_of(x_cl, mode, go_cl)
        assert torch.equal(grad_same, grad)


def test_module_and_functional():
    x = torch.randn(1, 2, 3, 4)
    for mode in MODES:
        module = mmops.CornerPool(mode)
        assert module.mode == mode and mode in repr(module)
        assert torch.equal(module(x), mmops.corner_pool(x, mode))
    with pytest.raises(ValueError, match="mode"):
        mmops.CornerPool("corner")
    scripted = torch.jit.script(mmops.CornerPool("left"))
    assert torch.equal(scripted(x), op(x, "left"))


def test_deterministic_gradient():
    x = torch.randint(0, 3, (2, 4, 16, 16)).float()
    go = torch.randn(2, 4, 16, 16)
    for mode in MODES:
        assert torch.equal(grad_of(x, mode, go)[1], grad_of(x, mode, go)[1])


def test_autocast_keeps_the_dtype():
    x = torch.randn(1, 3, 4, 5).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x, "top")
    assert out.dtype == torch.bfloat16 and torch.equal(out, op(x, "top"))


def test_double_backward_refused():
    x = torch.randn(1, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    go = torch.randn(1, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(x, "left"), x, go, create_graph=True)


def test_backward_helper_checks():
    x = torch.randn(1, 2, 3, 4)
    bwd = torch.ops.mmops._corner_pool_backward
    with pytest.raises(RuntimeError, match="mmops::corner_pool: expected grad_output to have input's shape"):
        bwd(torch.randn(1, 2, 3, 5), x, "top")
    with pytest.raises(RuntimeError, match="mmops::corner_pool: expected grad_output to have input's dtype"):
        bwd(torch.randn(1, 2, 3, 4, dtype=torch.float64), x, "top")
    with pytest.raises(RuntimeError, match="mmops::corner_pool: expected grad_output to be a 4-D tensor"):
        bwd(torch.randn(2, 3, 4), x, "top")
    with pytest.raises(RuntimeError, match="mmops::corner_pool: mode must be"):
        bwd(torch.randn(1, 2, 3, 4), x, "up")


# --------------------------------------------------------------------------- CUDA


def _cuda_inputs(shape, dtype, g, ties):
    x = torch.randint(-3, 4, shape, generator=g).double() if ties else torch.randn(shape, generator=g).double()
    if ties:
        x[torch.rand(shape, generator=g) < 0.02] = math.nan
    return x.to(dtype), small_ints(shape, g).to(dtype), torch.randn(shape, generator=g).to(dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", list(FORMATS))
def test_cuda_matches_cpu(mode, dtype, layout):
    """Bit for bit: the same argmax (ties, NaN) and the same summation order on both devices."""
    g = torch.Generator().manual_seed(7)
    # W across tile widths and chunk boundaries, H across the unrolled steps, rows across blocks
    shapes = SHAPES + [(2, 5, 37, 100), (1, 3, 129, 65), (3, 130, 9, 33), (2, 64, 17, 128)]
    for shape in shapes:
        for ties in (False, True):
            x, go_int, go = _cuda_inputs(shape, dtype, g, ties)
            x = x.contiguous(memory_format=FORMATS[layout])
            for grad_out in (go_int, go):
                out, grad = grad_of(x, mode, grad_out)
                out_c, grad_c = grad_of(x.cuda(), mode, grad_out.cuda())
                assert out_c.is_contiguous(memory_format=FORMATS[layout])
                torch.testing.assert_close(out_c.cpu(), out, rtol=0, atol=0, equal_nan=True)
                torch.testing.assert_close(grad_c.cpu(), grad, rtol=0, atol=0, equal_nan=True)


@pytest.mark.cuda
def test_cuda_equals_composite_on_cornernet_shape():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 16, 128, 128, generator=g).cuda()
    for mode in MODES:
        torch.testing.assert_close(op(x, mode), corner_pool_composite(x, mode), rtol=0, atol=0)


@pytest.mark.cuda
def test_cuda_large_rows_and_grid_stride():
    # more rows than one grid holds at once is not testable cheaply; many rows of W = 1 and one long line
    g = torch.Generator().manual_seed(9)
    for shape in [(1, 1, 1, 70000), (1, 1, 70000, 1), (4, 3000, 40, 1)]:
        x = torch.randn(shape, generator=g)
        go = torch.randn(shape, generator=g)
        for mode in MODES:
            out, grad = grad_of(x, mode, go)
            out_c, grad_c = grad_of(x.cuda(), mode, go.cuda())
            assert torch.equal(out_c.cpu(), out) and torch.equal(grad_c.cpu(), grad)


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.corner_pool")
    assert ops.CornerPool is module.CornerPool
    g = torch.Generator().manual_seed(10)
    x = torch.randint(-2, 3, (2, 3, 6, 7), generator=g).double()
    for mode in MODES:
        # mmcv's own vectors are int64: the bridge keeps mmcv's cummax for integer tensors
        lr_or_tb, answer = MMCV_ANSWERS[mode]
        out = ops.CornerPool(mode)(torch.tensor(lr_or_tb))
        assert out.dtype == torch.int64 and torch.equal(out, torch.tensor(answer))
        xm = x.clone().requires_grad_(True)
        out = ops.CornerPool(mode)(xm)
        torch.testing.assert_close(out, op(x, mode), rtol=0, atol=0)
        go = small_ints(x.shape, g)
        (grad,) = torch.autograd.grad(out, xm, go)
        assert "CornerPool" in out.grad_fn.name()  # mmops's autograd node, not cummax + flip
        torch.testing.assert_close(grad, torch.ops.mmops._corner_pool_backward(go, x, mode), rtol=0, atol=0)
    with pytest.raises(AssertionError):
        ops.CornerPool("corner")  # mmcv's own check
