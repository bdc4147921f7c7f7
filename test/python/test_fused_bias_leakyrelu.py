"""Tests of mmops::fused_bias_leakyrelu: the conformance cases, then the float64 loop reference
(fused_bias_leakyrelu_reference.py), hand-computed vectors, gradcheck and gradgradcheck
(gradients of any order, bias included), the module, CUDA == CPU and the mmcv bridge."""

import importlib
import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL
from fused_bias_leakyrelu_reference import fused_bias_leakyrelu_composite, fused_bias_leakyrelu_ref

import mmops

op = torch.ops.mmops.fused_bias_leakyrelu
bwd_op = torch.ops.mmops._fused_bias_leakyrelu_backward
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SQRT2 = 2**0.5


def make_inputs(shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    b = torch.randn(shape[1], generator=g, dtype=torch.float64) * 0.5
    return x.to(dtype), b.to(dtype)


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    # C stays 3: the case's module holds a FusedBiasLeakyReLU(3) (the 2-D case changes C)
    shape = (2, 3, 5, 7) if size == 0 else (3, 3, 6, 9)
    x, b = make_inputs(shape, seed=size, dtype=dtype)
    return Sample((x.to(device), b.to(device), 0.2, SQRT2))


def _sample_2d(device, dtype, size):
    x, b = make_inputs((5, 6) if size == 0 else (7, 9), seed=10 + size, dtype=dtype)
    return Sample((x.to(device), b.to(device), 0.1, 1.5))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample((torch.randn(0, 3, 4, 5, **f), torch.zeros(3, **f), 0.2, SQRT2), out_shapes=[(0, 3, 4, 5)]),
        Sample((torch.randn(2, 0, 4, 5, **f), torch.zeros(0, **f), 0.2, SQRT2), out_shapes=[(2, 0, 4, 5)]),
        Sample((torch.randn(2, 3, 0, **f), torch.zeros(3, **f), 0.2, SQRT2), out_shapes=[(2, 3, 0)]),
    ]


# CUDA paths: vector packs (inner a multiple of 16 bytes' values) and single values
CUDA_SHAPES = [(2, 5, 8, 8), (4, 3, 7, 5), (3, 16), (2, 4, 3), (1, 7, 33, 17)]


def _cuda_samples(dtype):
    for i, shape in enumerate(CUDA_SHAPES):
        x, b = make_inputs(shape, seed=20 + i, dtype=dtype)
        yield Sample((x, b, 0.2, SQRT2))


class _Net(torch.nn.Module):
    """fused_bias_leakyrelu in a model: the module, the functional wrapper and the op."""

    def __init__(self):
        super().__init__()
        self.act = mmops.FusedBiasLeakyReLU(3)

    def forward(self, x: torch.Tensor, bias: torch.Tensor):
        a = torch.ops.mmops.fused_bias_leakyrelu(x * 2.0, bias, 0.2, 1.4142135623730951)
        b = mmops.fused_bias_leakyrelu(x.sin(), bias * 0.5, 0.1, 2.0)
        return a + b, self.act(x)


def _helpers(sample):
    x, b, slope, scale = sample.args
    out = op(x, b, slope, scale)
    return [(bwd_op, (torch.randn_like(out), out, slope, scale))]


def _message(text):
    return f"mmops::fused_bias_leakyrelu: .*{text}"


CONFORMANCE = [
    ConformanceCase(
        "fused_bias_leakyrelu",
        op,
        _sample,
        grad_args=(0, 1),
        feature_args=(0,),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        nonzero_grads=True,
        bad_inputs={
            "input_1d": BadInput(lambda x, b, s, k: (x[0, 0, 0], b, s, k), _message("at least 2 dims"), meta=True),
            "int_input": BadInput(
                lambda x, b, s, k: (x.int(), b.int(), s, k), _message("input to have a float"), meta=True
            ),
            "bias_2d": BadInput(lambda x, b, s, k: (x, b[None], s, k), _message("bias to be a 1-D"), meta=True),
            "bias_size": BadInput(lambda x, b, s, k: (x, b[1:], s, k), _message("bias to hold C = 3"), meta=True),
            "bias_dtype": BadInput(
                lambda x, b, s, k: (x, b.double(), s, k), _message("bias to have the dtype"), meta=True
            ),
            "slope_nan": BadInput(lambda x, b, s, k: (x, b, math.nan, k), _message("finite negative_slope"), meta=True),
            "scale_inf": BadInput(lambda x, b, s, k: (x, b, s, math.inf), _message("finite scale"), meta=True),
        },
    ),
    ConformanceCase("fused_bias_leakyrelu_2d", op, _sample_2d, grad_args=(0, 1), dtypes=(), nonzero_grads=True),
]


class TestFusedBiasLeakyReLUConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- values

SHAPES = [(2, 3, 5, 7), (4, 6), (1, 2, 3, 4, 5), (3, 4, 17)]
PARAMS = [(0.2, SQRT2), (0.0, 1.0), (0.5, 3.0), (-0.3, 0.7)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(dtype):
    for i, shape in enumerate(SHAPES):
        slope, scale = PARAMS[i % len(PARAMS)]
        x, b = make_inputs(shape, seed=i, dtype=dtype)
        out = op(x, b, slope, scale)
        exp = fused_bias_leakyrelu_ref(x, b, slope, scale)
        assert out.dtype == dtype and out.shape == x.shape
        tol = dict(rtol=0, atol=0) if dtype == torch.float64 else TOL[dtype]
        torch.testing.assert_close(out.double(), exp, **tol)


def test_known_vectors():
    x = torch.tensor([[-2.0, -0.5, 0.0, 0.5, 2.0]], dtype=torch.float64).reshape(1, 1, 5)
    b = torch.tensor([0.5], dtype=torch.float64)
    # x + b = [-1.5, 0, 0.5, 1, 2.5]: negatives times 0.2, then everything times 2
    assert op(x, b, 0.2, 2.0).flatten().tolist() == [-0.6000000000000001, 0.0, 1.0, 2.0, 5.0]
    # defaults: slope 0.2, scale sqrt(2)
    assert op(x, b).flatten().tolist() == pytest.approx([-1.5 * 0.2 * SQRT2, 0.0, 0.5 * SQRT2, SQRT2, 2.5 * SQRT2])
    # the gradient: scale where the output is > 0, slope * scale elsewhere (0 included: mmcv's rule)
    xg = x.clone().requires_grad_(True)
    bg = b.clone().requires_grad_(True)
    op(xg, bg, 0.2, 2.0).sum().backward()
    assert xg.grad.flatten().tolist() == [0.4, 0.4, 2.0, 2.0, 2.0]
    assert bg.grad.tolist() == [0.4 + 0.4 + 2.0 + 2.0 + 2.0]


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 4), (2, 2, 3, 2, 2)])
def test_gradcheck_and_gradgradcheck(shape):
    x, b = make_inputs(shape, seed=5, dtype=torch.float64)
    # keep x + b away from the kink at 0 (finite differences straddling it)
    x = torch.where((x + b.reshape([-1 if d == 1 else 1 for d in range(len(shape))])).abs() < 1e-3, x + 0.01, x)
    x.requires_grad_(True)
    b.requires_grad_(True)
    fn = lambda t, c: op(t, c, 0.2, SQRT2)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, b))
    assert torch.autograd.gradgradcheck(fn, (x, b))


def test_gradients_match_composite_to_second_order():
    x, b = make_inputs((2, 4, 5, 5), seed=6, dtype=torch.float64)
    w = torch.randn(2, 4, 5, 5, dtype=torch.float64, requires_grad=True)

    def penalty(fn):
        xi = x.clone().requires_grad_(True)
        bi = b.clone().requires_grad_(True)
        out = fn(xi * w, bi)
        gx, gb = torch.autograd.grad((out**2).sum(), (xi, bi), create_graph=True)
        return torch.autograd.grad(gx.pow(2).sum() + gb.pow(2).sum(), (w,))[0], gx.detach(), gb.detach()

    ours = penalty(lambda t, c: op(t, c, 0.2, SQRT2))
    theirs = penalty(lambda t, c: fused_bias_leakyrelu_composite(t, c, 0.2, SQRT2))
    for a, e in zip(ours, theirs):
        torch.testing.assert_close(a, e, rtol=1e-12, atol=1e-12)


def _mask_factor(out, slope, scale):
    """scale where out > 0, slope * scale elsewhere (float64, the kernels' product)."""
    pos = (out > 0).double()
    return pos * scale + (1 - pos) * (slope * scale)


def test_backward_helper():
    x, b = make_inputs((2, 3, 4), seed=7, dtype=torch.float64)
    out = op(x, b, 0.2, 3.0)
    g = torch.randn_like(out)
    torch.testing.assert_close(bwd_op(g, out, 0.2, 3.0), g * _mask_factor(out, 0.2, 3.0), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match=_message("output of shape")):
        bwd_op(g, out[:1], 0.2, 3.0)
    with pytest.raises(RuntimeError, match=_message("output with the dtype")):
        bwd_op(g, out.float(), 0.2, 3.0)
    # its own gradient: the same mask on the incoming gradient, none for output
    gg = g.clone().requires_grad_(True)
    (d,) = torch.autograd.grad(bwd_op(gg, out, 0.2, 3.0).sum(), gg)
    torch.testing.assert_close(d, _mask_factor(out, 0.2, 3.0), rtol=0, atol=0)


def test_bias_only_and_input_only_gradients():
    x, b = make_inputs((2, 3, 4), seed=8, dtype=torch.float64)
    bg = b.clone().requires_grad_(True)
    (gb,) = torch.autograd.grad(op(x, bg).sum(), bg)
    exp = _mask_factor(op(x, b), 0.2, SQRT2).sum(dim=(0, 2))
    torch.testing.assert_close(gb, exp, rtol=1e-12, atol=1e-12)
    xg = x.clone().requires_grad_(True)
    (gx,) = torch.autograd.grad(op(xg, b).sum(), xg)
    torch.testing.assert_close(gx, _mask_factor(op(x, b), 0.2, SQRT2), rtol=0, atol=0)


# --------------------------------------------------------------------------- module and rules


def test_module_and_functional():
    x, _ = make_inputs((2, 3, 4, 4), seed=9)
    module = mmops.FusedBiasLeakyReLU(3)
    assert repr(module) == f"FusedBiasLeakyReLU(num_channels=3, negative_slope=0.2, scale={SQRT2})"
    assert module.bias.shape == (3,) and (module.bias == 0).all()
    torch.testing.assert_close(module(x), torch.nn.functional.leaky_relu(x, 0.2) * SQRT2)
    scripted = torch.jit.script(module)
    torch.testing.assert_close(scripted(x), module(x), rtol=0, atol=0)
    # the wrapper casts bias to input's dtype (mmcv's rule): a float32 bias with float64 input
    xd = x.double()
    torch.testing.assert_close(mmops.fused_bias_leakyrelu(xd, module.bias), op(xd, module.bias.double()))


def test_nan_and_inf():
    x = torch.tensor([[math.nan, math.inf, -math.inf]], dtype=torch.float64)
    out = op(x, torch.zeros(3, dtype=torch.float64), 0.2, 2.0)
    assert math.isnan(out[0, 0]) and out[0, 1] == math.inf and out[0, 2] == -math.inf


def test_strided_and_channels_last_inputs():
    x, b = make_inputs((2, 3, 5, 6), seed=11)
    exp = op(x, b)
    wide = torch.randn(2, 6, 5, 12)[:, ::2, :, ::2]
    wide.copy_(x)
    torch.testing.assert_close(op(wide, b), exp, rtol=0, atol=0)
    torch.testing.assert_close(op(x.contiguous(memory_format=torch.channels_last), b), exp, rtol=0, atol=0)
    torch.testing.assert_close(op(x, torch.randn(6)[::2].copy_(b)), exp, rtol=0, atol=0)


def test_autocast_runs_in_float32():
    x, b = make_inputs((2, 3, 4, 4), seed=12)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x.bfloat16(), b)  # bfloat16 input, float32 bias
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, op(x.bfloat16().float(), b).bfloat16(), rtol=0, atol=0)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu(dtype):
    for i, shape in enumerate(CUDA_SHAPES + SHAPES):
        x, b = make_inputs(shape, seed=30 + i, dtype=dtype)
        exp = op(x, b)
        torch.testing.assert_close(op(x.cuda(), b.cuda()).cpu(), exp, **TOL[dtype])
        g = torch.randn(shape).to(dtype)
        torch.testing.assert_close(
            bwd_op(g.cuda(), exp.cuda(), 0.2, SQRT2).cpu(), bwd_op(g, exp, 0.2, SQRT2), **TOL[dtype]
        )


@pytest.mark.cuda
def test_cuda_misaligned_and_second_order():
    x, b = make_inputs((2, 8, 16, 16), seed=40)
    flat = torch.empty(x.numel() + 1, device="cuda")[1:]
    shifted = flat.view(x.shape)
    shifted.copy_(x.cuda())
    assert shifted.data_ptr() % 16 != 0
    torch.testing.assert_close(op(shifted, b.cuda()).cpu(), op(x, b), rtol=0, atol=0)
    xd, bd = make_inputs((2, 3, 4, 4), seed=41, dtype=torch.float64)
    xd, bd = xd.cuda().requires_grad_(True), bd.cuda().requires_grad_(True)
    assert torch.autograd.gradgradcheck(lambda t, c: op(t, c), (xd, bd))


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.fused_bias_leakyrelu")
    x, b = make_inputs((2, 3, 4, 4), seed=50, dtype=torch.float64)
    exp = op(x, b, 0.2, SQRT2)
    torch.testing.assert_close(ops.fused_bias_leakyrelu(x, b), exp, rtol=0, atol=0)
    torch.testing.assert_close(module.bias_leakyrelu_ref(x, b), exp, rtol=1e-12, atol=1e-12)
    m = ops.FusedBiasLeakyReLU(3, 0.1, 2.0)
    torch.testing.assert_close(m(x.float()), op(x.float(), torch.zeros(3), 0.1, 2.0), rtol=0, atol=0)
    torch.testing.assert_close(module.FusedBiasLeakyReLUFunction.apply(x, b, 0.2, SQRT2), exp, rtol=0, atol=0)
    # second order through the bridge
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(ops.fused_bias_leakyrelu(xg, b).square().sum(), xg, create_graph=True)
    assert g.requires_grad
    # mmcv's ext kernel contract: (input, bias, ref, act=3, grad, alpha, scale)
    empty = x.new_empty(0)
    torch.testing.assert_close(
        module.ext_module.fused_bias_leakyrelu(x, b, empty, act=3, grad=0, alpha=0.2, scale=SQRT2), exp, rtol=0, atol=0
    )
    go = torch.randn_like(x)
    torch.testing.assert_close(
        module.ext_module.fused_bias_leakyrelu(go, empty, exp, act=3, grad=1, alpha=0.2, scale=SQRT2),
        bwd_op(go, exp, 0.2, SQRT2),
        rtol=0,
        atol=0,
    )
