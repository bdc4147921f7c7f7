"""Tests of mmops::bias_act: the conformance cases, then the float64 reference
(bias_act_reference.py) for every act, hand-computed vectors, gradcheck and gradgradcheck for
every act (clamp, no bias, other dims), the backward helper, layouts, CUDA == CPU and the mmcv
bridge."""

import math

import pytest
import torch
from bias_act_reference import ACTS, bias_act_composite, bias_act_grad_ref, bias_act_ref
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, run_with_default_cpu_capability

import mmops

op = torch.ops.mmops.bias_act
bwd_op = torch.ops.mmops._bias_act_backward
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SQRT2 = 2**0.5
SECOND_ORDER = ("tanh", "sigmoid", "elu", "selu", "softplus", "swish")


def make_inputs(shape, dim=1, seed=0, dtype=torch.float32, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    b = torch.randn(shape[dim], generator=g, dtype=torch.float64) * 0.5
    return x.to(dtype), b.to(dtype)


def resolved(act, clamp=None):
    """(dim, act, alpha, gain, clamp) as the backward op takes them."""
    alpha, gain = ACTS[act]
    return alpha, gain, -1.0 if clamp is None else clamp


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    # C stays 3: the case's module adds a bias of 3
    shape = (2, 3, 5, 7) if size == 0 else (3, 3, 6, 9)
    x, b = make_inputs(shape, seed=size, dtype=dtype)
    return Sample((x.to(device), b.to(device), 1, "lrelu", None, None, None))


def _sample_clamp(device, dtype, size):
    x, b = make_inputs((2, 4, 6) if size == 0 else (3, 5, 8), dim=2, seed=3 + size, dtype=dtype, scale=2.0)
    return Sample((x.to(device), b.to(device), 2, "tanh", None, 2.0, 1.5))


def _sample_swish(device, dtype, size):
    x, b = make_inputs((4, 6) if size == 0 else (5, 9), dim=0, seed=5 + size, dtype=dtype, scale=3.0)
    return Sample((x.to(device), b.to(device), -2, "swish", None, None, 2.0))


def _sample_no_bias(device, dtype, size):
    x, _ = make_inputs((2, 3, 4) if size == 0 else (3, 2, 5), seed=7 + size, dtype=dtype)
    return Sample((x.to(device), None, 1, "softplus", 0.0, 0.5, None))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample(
            (torch.randn(0, 3, 4, 5, **f), torch.zeros(3, **f), 1, "lrelu", None, None, 256.0),
            out_shapes=[(0, 3, 4, 5)],
        ),
        Sample((torch.randn(2, 0, 4, **f), torch.zeros(0, **f), 1, "tanh", None, None, None), out_shapes=[(2, 0, 4)]),
        Sample((torch.randn(2, 3, 0, **f), None, 1, "swish", None, None, None), out_shapes=[(2, 3, 0)]),
    ]


# CUDA paths: vector packs (a multiple of 16 bytes' values), single values, packs straddling channels
CUDA_CASES = [
    ((2, 5, 8, 8), 1, "lrelu", None),
    ((4, 3, 7, 5), 1, "lrelu", 0.5),
    ((3, 16), 1, "relu", None),
    ((2, 4, 3), 2, "tanh", 0.8),
    ((1, 7, 33, 17), 1, "sigmoid", None),
    ((2, 6, 5, 8), 3, "swish", 1.0),
]


def _cuda_samples(dtype):
    for i, (shape, dim, act, clamp) in enumerate(CUDA_CASES):
        x, b = make_inputs(shape, dim=dim, seed=20 + i, dtype=dtype)
        yield Sample((x, b, dim, act, None, None, clamp))


class _Net(torch.nn.Module):
    """bias_act in a model: the op and the functional wrapper."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.linspace(-0.5, 0.5, 3))

    def forward(self, x: torch.Tensor, bias: torch.Tensor):
        a = torch.ops.mmops.bias_act(x * 2.0, bias, 1, "lrelu", None, None, 256.0)
        b = mmops.bias_act(x.sin(), bias * 0.5, dim=1, act="tanh", gain=2.0)
        c = mmops.bias_act(x, self.bias.to(x.dtype), act="swish", clamp=1.0)
        return a + b, c


def _helpers(sample):
    x, b, dim, act, alpha, gain, clamp = sample.args
    out = op(*sample.args)
    a, g, c = resolved(act, clamp)
    a = a if alpha is None else alpha
    g = g if gain is None else gain
    grad = torch.randn_like(out)
    calls = [(bwd_op, (grad, x, b, out, dim, act, a, g, c, 1))]
    if act in SECOND_ORDER:
        calls.append((bwd_op, (grad, x, b, out, dim, act, a, g, c, 2)))
    return calls


def _message(text):
    return f"mmops::bias_act: .*{text}"


def _with(i, value):
    return lambda *args: tuple(value if j == i else a for j, a in enumerate(args))


CONFORMANCE = [
    ConformanceCase(
        "bias_act",
        op,
        _sample,
        grad_args=(0, 1),
        feature_args=(0,),
        channels_last_output=True,
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        nonzero_grads=True,
        bad_inputs={
            "int_input": BadInput(lambda x, b, *r: (x.int(), b.int(), *r), _message("input to have a float"), True),
            "unknown_act": BadInput(
                _with(3, "gelu"), _message('act must be "linear", "relu", .* but got "gelu"'), True
            ),
            "bias_2d": BadInput(lambda x, b, *r: (x, b[None], *r), _message("bias to be a 1-D"), meta=True),
            "bias_size": BadInput(lambda x, b, *r: (x, b[1:], *r), _message("bias to hold 3 values"), meta=True),
            "bias_dtype": BadInput(lambda x, b, *r: (x, b.double(), *r), _message("bias to have the dtype"), True),
            "dim_range": BadInput(_with(2, 4), _message(r"dim in \[-4, 4\) .* but got 4"), meta=True),
            "clamp_negative": BadInput(_with(6, -1.0), _message("clamp >= 0 or None, but got -1"), meta=True),
            "alpha_nan": BadInput(_with(4, math.nan), _message("finite alpha"), meta=True),
            "gain_inf": BadInput(_with(5, math.inf), _message("finite gain"), meta=True),
        },
    ),
    ConformanceCase("bias_act_tanh_clamp", op, _sample_clamp, grad_args=(0, 1), dtypes=(), helpers=_helpers),
    ConformanceCase("bias_act_swish", op, _sample_swish, grad_args=(0, 1), dtypes=(), helpers=_helpers),
    ConformanceCase("bias_act_no_bias", op, _sample_no_bias, grad_args=(0,), dtypes=(), helpers=_helpers),
]


class TestBiasActConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- values

SHAPES = [((2, 3, 5, 7), 1), ((4, 6), 0), ((1, 2, 3, 4, 5), 3), ((3, 4, 17), -1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", list(ACTS))
def test_matches_reference(act, dtype):
    for i, (shape, dim) in enumerate(SHAPES):
        x, b = make_inputs(shape, dim=dim, seed=i, dtype=dtype, scale=2.0)
        bias = None if i == 1 else b
        alpha = 0.1 if i == 2 else None
        gain = 0.7 if i == 3 else None
        clamp = 1.0 if i % 2 else None
        out = op(x, bias, dim, act, alpha, gain, clamp)
        exp = bias_act_ref(x, bias, dim, act, alpha, gain, clamp)
        assert out.dtype == dtype and out.shape == x.shape
        tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else TOL[dtype]
        torch.testing.assert_close(out.double(), exp, **tol, msg=f"{act} {shape}")


@pytest.mark.parametrize("act", list(ACTS))
def test_gradients_match_reference(act):
    for i, (shape, dim) in enumerate(SHAPES):
        x, b = make_inputs(shape, dim=dim, seed=40 + i, dtype=torch.float64, scale=2.0)
        clamp = 1.0 if i % 2 else None
        out = op(x, b, dim, act, None, None, clamp)
        g = torch.randn_like(out)
        alpha, gain, c = resolved(act, clamp)
        exp = bias_act_grad_ref(g, x, b, dim, act, None, None, clamp)
        torch.testing.assert_close(bwd_op(g, x, b, out, dim, act, alpha, gain, c, 1), exp, rtol=1e-10, atol=1e-12)
        xg, bg = x.clone().requires_grad_(True), b.clone().requires_grad_(True)
        gx, gb = torch.autograd.grad(op(xg, bg, dim, act, None, None, clamp), (xg, bg), g)
        torch.testing.assert_close(gx, exp, rtol=1e-10, atol=1e-12)
        d = dim % x.dim()
        torch.testing.assert_close(gb, exp.sum([k for k in range(x.dim()) if k != d]), rtol=1e-10, atol=1e-10)
        exp2 = bias_act_grad_ref(g, x, b, dim, act, None, None, clamp, order=2)
        torch.testing.assert_close(bwd_op(g, x, b, out, dim, act, alpha, gain, c, 2), exp2, rtol=1e-10, atol=1e-12)


def _known(fn, values):
    return [fn(v) for v in values]


def _sig(v):
    return 1 / (1 + math.exp(-v))


S, SA = 1.0507009873554804934193349852946, 1.0507009873554804934193349852946 * 1.6732632423543772848170429916717
# act: (f, f', f'') written out with math, for x + bias = V
KNOWN = {
    "linear": (lambda v: v, lambda v: 1.0, lambda v: 0.0),
    "relu": (lambda v: max(v, 0.0), lambda v: float(v > 0), lambda v: 0.0),
    "lrelu": (lambda v: v if v > 0 else 0.2 * v, lambda v: 1.0 if v > 0 else 0.2, lambda v: 0.0),
    "tanh": (math.tanh, lambda v: 1 - math.tanh(v) ** 2, lambda v: -2 * math.tanh(v) * (1 - math.tanh(v) ** 2)),
    "sigmoid": (_sig, lambda v: _sig(v) * (1 - _sig(v)), lambda v: _sig(v) * (1 - _sig(v)) * (1 - 2 * _sig(v))),
    "elu": (
        lambda v: v if v >= 0 else math.expm1(v),
        lambda v: 1.0 if v >= 0 else math.exp(v),
        lambda v: 0.0 if v >= 0 else math.exp(v),
    ),
    "selu": (
        lambda v: S * v if v >= 0 else SA * math.expm1(v),
        lambda v: S if v >= 0 else SA * math.exp(v),
        lambda v: 0.0 if v >= 0 else SA * math.exp(v),
    ),
    "softplus": (lambda v: math.log1p(math.exp(v)), _sig, lambda v: _sig(v) * (1 - _sig(v))),
    "swish": (
        lambda v: v * _sig(v),
        lambda v: _sig(v) + v * _sig(v) * (1 - _sig(v)),
        lambda v: _sig(v) * (1 - _sig(v)) * (2 + v * (1 - 2 * _sig(v))),
    ),
}
V = [-3.0, -0.5, 0.0, 0.25, 1.5, 4.0]


@pytest.mark.parametrize("act", list(ACTS))
def test_known_vectors(act):
    f, d1, d2 = KNOWN[act]
    alpha, gain = ACTS[act]
    x = torch.tensor(V, dtype=torch.float64).reshape(1, 1, -1) - 0.5
    b = torch.tensor([0.5], dtype=torch.float64)
    out = op(x, b, 1, act)
    assert out.flatten().tolist() == pytest.approx([f(v) * gain for v in V], rel=1e-14, abs=1e-15)
    g = torch.full_like(x, 2.0)
    gx = bwd_op(g, x, b, out, 1, act, alpha, gain, -1.0, 1).flatten().tolist()
    assert gx == pytest.approx([2.0 * gain * d1(v) for v in V], rel=1e-12, abs=1e-14)
    gx2 = bwd_op(g, x, b, out, 1, act, alpha, gain, -1.0, 2).flatten().tolist()
    assert gx2 == pytest.approx([2.0 * gain * d2(v) for v in V], rel=1e-12, abs=1e-14)
    # clamp 1: outputs beyond it are clamped and get no gradient (|f * gain| >= 1)
    clamped = op(x, b, 1, act, clamp=1.0).flatten().tolist()
    assert clamped == pytest.approx([min(max(f(v) * gain, -1.0), 1.0) for v in V], rel=1e-14, abs=1e-15)
    out_c = op(x, b, 1, act, clamp=1.0)
    gc = bwd_op(g, x, b, out_c, 1, act, alpha, gain, 1.0, 1).flatten().tolist()
    assert gc == pytest.approx([2.0 * gain * d1(v) if abs(f(v) * gain) < 1 else 0.0 for v in V], rel=1e-12, abs=1e-14)


def test_defaults_and_mmcv_examples():
    """mmcv's defaults (act linear: the bias only) and the relations its tests check."""
    x, b = make_inputs((1, 3), seed=1)
    torch.testing.assert_close(op(x, b), x + b, rtol=0, atol=0)
    torch.testing.assert_close(mmops.bias_act(x), x, rtol=0, atol=0)
    assert op(x).data_ptr() != x.data_ptr()  # always a new tensor (mmcv may return input itself)
    out1, out2 = (mmops.bias_act(x, b, act="lrelu", gain=g) for g in (0.2, 0.1))
    torch.testing.assert_close(out1, out2 * 2)
    assert mmops.bias_act(x, b, act="lrelu", clamp=0.2).abs().max() <= 0.2
    # integer alpha (mmcv's Union[float, int]) and dim ignored without a bias
    torch.testing.assert_close(mmops.bias_act(x, act="lrelu", alpha=1), x * SQRT2)
    torch.testing.assert_close(mmops.bias_act(x, dim=7, act="relu"), torch.relu(x) * SQRT2)


# --------------------------------------------------------------------------- gradients


def _away_from_kinks(x, b, dim, act, clamp):
    """x moved so that x + b keeps off 0 (the kinks) and |f * gain| off clamp (finite differences)."""
    shape = [-1 if d == dim % x.dim() else 1 for d in range(x.dim())]
    v = x + b.reshape(shape)
    x = torch.where(v.abs() < 0.02, x + 0.05, x)
    if clamp is not None:
        for _ in range(3):
            y = bias_act_ref(x, b, dim, act)
            x = torch.where((y.abs() - clamp).abs() < 0.02, x + 0.07, x)
    return x


GRAD_CASES = [
    ((2, 3, 4), 1, True, None),
    ((3, 4), 0, True, 0.9),
    ((2, 2, 3, 2), 2, False, None),
    ((2, 3, 5), -1, True, 1.2),
]


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("case", range(len(GRAD_CASES)))
def test_gradcheck_and_gradgradcheck(act, case):
    shape, dim, with_bias, clamp = GRAD_CASES[case]
    x, b = make_inputs(shape, dim=dim, seed=60 + case, dtype=torch.float64, scale=1.5)
    x = _away_from_kinks(x, b if with_bias else torch.zeros_like(b), dim, act, clamp).requires_grad_(True)
    b.requires_grad_(True)
    if with_bias:
        args, fn = (x, b), (lambda t, c: op(t, c, dim, act, None, None, clamp))
    else:
        args, fn = (x,), (lambda t: op(t, None, dim, act, None, None, clamp))
    assert torch.autograd.gradcheck(fn, args)
    assert torch.autograd.gradgradcheck(fn, args)


@pytest.mark.parametrize("act", list(ACTS))
def test_second_order_matches_composite(act):
    """An R1-style penalty (the gradient's norm, differentiated again) against torch's composite."""
    x, b = make_inputs((2, 4, 5, 5), seed=6, dtype=torch.float64)
    x = _away_from_kinks(x, b, 1, act, 0.8)
    w = torch.randn(2, 4, 5, 5, dtype=torch.float64, requires_grad=True)

    def penalty(fn):
        xi = x.clone().requires_grad_(True)
        bi = b.clone().requires_grad_(True)
        out = fn(xi * w, bi)
        gx, gb = torch.autograd.grad((out**2).sum(), (xi, bi), create_graph=True)
        return torch.autograd.grad(gx.pow(2).sum() + gb.pow(2).sum(), (w,))[0], gx.detach(), gb.detach()

    ours = penalty(lambda t, c: op(t, c, 1, act, None, None, 0.8))
    theirs = penalty(lambda t, c: bias_act_composite(t, c, 1, act, None, None, 0.8))
    for a, e in zip(ours, theirs):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-12)


def test_third_order():
    x, b = make_inputs((2, 3, 4), seed=8, dtype=torch.float64)
    # relu / lrelu / linear: f'' = 0, every order works (zero beyond the first)
    xg = x.clone().requires_grad_(True)
    (g1,) = torch.autograd.grad(op(xg, b, 1, "lrelu").pow(3).sum(), xg, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), xg, create_graph=True)
    (g3,) = torch.autograd.grad(g2.sum(), xg)
    assert torch.isfinite(g3).all()
    # the others: a clear error (mmcv has first and second order)
    (g1,) = torch.autograd.grad(op(xg, b, 1, "tanh").sum(), xg, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), xg, create_graph=True)
    with pytest.raises(RuntimeError, match=_message("third order w.r.t. input or bias are not implemented")):
        torch.autograd.grad(g2.sum(), xg)


def test_saved_tensors_follow_mmcv():
    """What the forward keeps for the backward: relu / lrelu the output alone (input can be
    freed), swish input and bias, the acts with a second derivative all three."""
    x, b = make_inputs((2, 3, 4), seed=9)
    xg, bg = x.clone().requires_grad_(True), b.clone().requires_grad_(True)
    expected = {
        ("lrelu", None): {"output"},
        ("relu", None): {"output"},
        ("linear", None): set(),
        ("linear", 1.0): {"output"},
        ("swish", None): {"input", "bias"},
        ("tanh", None): {"input", "bias", "output"},
    }
    for (act, clamp), names in expected.items():
        packed = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
            out = op(xg, bg, 1, act, None, 2.0, clamp)
        ptrs = {out.data_ptr(): "output", xg.data_ptr(): "input", bg.data_ptr(): "bias"}
        assert {ptrs[t.data_ptr()] for t in packed if t.numel()} == names, (act, clamp)


def test_backward_helper_errors():
    x, b = make_inputs((2, 3, 4), seed=10, dtype=torch.float64)
    out = op(x, b, 1, "relu")
    g = torch.randn_like(out)
    with pytest.raises(RuntimeError, match=_message('output .* for act "relu", but got None')):
        bwd_op(g, x, b, None, 1, "relu", 0.0, SQRT2, -1.0, 1)
    with pytest.raises(RuntimeError, match=_message('output .* for act "linear" with a clamp, but got None')):
        bwd_op(g, None, None, None, 1, "linear", 0.0, 1.0, 2.0, 1)
    with pytest.raises(RuntimeError, match=_message('input .* for act "swish", but got None')):
        bwd_op(g, None, None, out, 1, "swish", 0.0, SQRT2, -1.0, 1)
    with pytest.raises(RuntimeError, match=_message("order 1 or 2")):
        bwd_op(g, x, b, out, 1, "relu", 0.0, SQRT2, -1.0, 3)
    with pytest.raises(RuntimeError, match=_message("output of shape")):
        bwd_op(g, x, b, out[:1], 1, "relu", 0.0, SQRT2, -1.0, 1)
    with pytest.raises(RuntimeError, match=_message("input with the dtype and device")):
        bwd_op(g, x.float(), b, out, 1, "relu", 0.0, SQRT2, -1.0, 1)
    with pytest.raises(RuntimeError, match=_message("not NaN")):
        bwd_op(g, x, b, out, 1, "relu", 0.0, SQRT2, math.nan, 1)
    with pytest.raises(RuntimeError, match=_message('act must be .* but got "Relu"')):
        bwd_op(g, x, b, out, 1, "Relu", 0.0, SQRT2, -1.0, 1)
    # linear without a clamp reads nothing but grad_output
    torch.testing.assert_close(bwd_op(g, None, None, None, 1, "linear", 0.0, 3.0, -1.0, 1), g * 3.0)


# --------------------------------------------------------------------------- layouts and rules


def test_layouts():
    x, b = make_inputs((2, 5, 4, 6), seed=11)
    exp = op(x, b, 1, "lrelu", None, None, 0.9)
    cl = x.contiguous(memory_format=torch.channels_last)
    out = op(cl, b, 1, "lrelu", None, None, 0.9)
    assert out.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out, exp, rtol=0, atol=0)
    for dim in (0, 2, 3):  # the bias along the other dims of a channels_last tensor
        bd = torch.randn(x.shape[dim])
        torch.testing.assert_close(op(cl, bd, dim, "swish"), op(x, bd, dim, "swish"), rtol=0, atol=0)
    wide = torch.randn(2, 10, 4, 12)[:, ::2, :, ::2]
    wide.copy_(x)
    torch.testing.assert_close(op(wide, b, 1, "lrelu", None, None, 0.9), exp, rtol=0, atol=0)
    torch.testing.assert_close(op(x, torch.randn(10)[::2].copy_(b), 1, "lrelu", None, None, 0.9), exp, rtol=0, atol=0)
    # gradients of a channels_last input, a contiguous grad_output
    xg = cl.clone().requires_grad_(True)
    (gx,) = torch.autograd.grad(op(xg, b, 1, "tanh"), xg, torch.ones_like(x))
    xc = x.clone().requires_grad_(True)
    torch.testing.assert_close(gx, torch.autograd.grad(op(xc, b, 1, "tanh"), xc, torch.ones_like(x))[0])


# The CPU loops' bias paths: runs of 64 values or more whose blocks straddle two channels (9 x 9
# planes, dim 2 with runs of 70), runs shorter than a block (the bias pattern: 4 x 4 planes,
# channels last), partial blocks at the end.
CPU_RUN_CASES = [
    ((2, 5, 9, 9), 1, torch.contiguous_format),
    ((1, 3, 67, 70), 2, torch.contiguous_format),
    ((3, 6, 4, 4), 1, torch.contiguous_format),
    ((2, 7, 5, 3), 1, torch.channels_last),
]


@pytest.mark.parametrize("act", list(ACTS))
def test_cpu_bias_runs(act):
    _check_cpu_bias_runs(act)


def test_baseline_cpu_build_bias_runs():
    # The CPU loops are built per instruction set (cpu_simd.h): the DEFAULT build here.
    run_with_default_cpu_capability("test_bias_act", "_check_all_cpu_bias_runs")


def _check_all_cpu_bias_runs():
    for act in ACTS:
        _check_cpu_bias_runs(act)


def _check_cpu_bias_runs(act):
    for i, (shape, dim, fmt) in enumerate(CPU_RUN_CASES):
        clamp = 0.75 if i % 2 else None
        for dtype in DTYPES:
            x, b = make_inputs(shape, dim=dim, seed=60 + i, dtype=dtype, scale=2.0)
            x = x.contiguous(memory_format=fmt)
            out = op(x, b, dim, act, None, None, clamp)
            tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else TOL[dtype]
            exp = bias_act_ref(x, b, dim, act, None, None, clamp)
            torch.testing.assert_close(out.double(), exp, **tol, msg=f"{act} {shape} {dtype}")
        # the backward in float64 (its bias rounding: none), both orders
        x, b = make_inputs(shape, dim=dim, seed=60 + i, dtype=torch.float64, scale=2.0)
        x = x.contiguous(memory_format=fmt)
        out = op(x, b, dim, act, None, None, clamp)
        g = torch.randn_like(out)
        alpha, gain, c = resolved(act, clamp)
        for order in (1, 2) if act in SECOND_ORDER else (1,):
            exp = bias_act_grad_ref(g, x, b, dim, act, None, None, clamp, order=order)
            got = bwd_op(g, x, b, out, dim, act, alpha, gain, c, order)
            torch.testing.assert_close(got, exp, rtol=1e-10, atol=1e-12, msg=f"{act} {shape} order {order}")


def test_cpu_result_independent_of_threads():
    """Chunks of 32768 values per task: with two threads, a chunk starts inside a run."""
    x, b = make_inputs((1, 3, 150, 181), seed=70)
    g = torch.randn_like(x)
    threads = torch.get_num_threads()
    results = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            out = op(x, b, 1, "swish", None, None, 1.0)
            results.append((out, bwd_op(g, x, b, out, 1, "swish", 0.0, SQRT2, 1.0, 1)))
    finally:
        torch.set_num_threads(threads)
    for one, two in zip(*results):
        torch.testing.assert_close(one, two, rtol=0, atol=0)


def test_nan_and_inf():
    x = torch.tensor([[math.nan, math.inf, -math.inf, 1.0]], dtype=torch.float64)
    for act in ("linear", "relu", "lrelu", "tanh", "sigmoid", "elu", "selu", "softplus"):
        out = op(x, None, 1, act, None, 1.0, None)
        assert math.isnan(out[0, 0]), act  # NaN propagates
        assert out[0, 1] == KNOWN[act][0](math.inf) if act != "softplus" else out[0, 1] == math.inf
    # the clamp keeps NaN (torch.clamp) and bounds infinities
    out = op(x, None, 1, "linear", None, None, 2.0)
    assert math.isnan(out[0, 0]) and out[0, 1:3].tolist() == [2.0, -2.0]


def test_autocast_runs_in_float32():
    x, b = make_inputs((2, 3, 4, 4), seed=12)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x.bfloat16(), b, 1, "lrelu")  # bfloat16 input, float32 bias
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, op(x.bfloat16().float(), b, 1, "lrelu").bfloat16(), rtol=0, atol=0)


# --------------------------------------------------------------------------- CUDA


def _kernel_bias_indices(numel, vec, step, channels):
    """The CUDA kernel's bias index of every storage value (load_bias: one division per pack of
    `vec` values, then a cursor), emulated."""
    out = []
    for first in range(0, numel, vec):
        q = first // step
        c, r = q % channels, first - q * step
        for _ in range(vec):
            out.append(c)
            r += 1
            if r == step:
                r, c = 0, (0 if c + 1 == channels else c + 1)
    return out


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_cuda_bias_index_emulation(layout):
    """The kernels' layout rule (bias[(i / stride(dim)) % C] over the storage) and the CUDA pack
    cursor give every value the channel of its index along dim, in any dense layout."""
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    for shape in [(2, 5, 4, 3), (1, 8, 2, 2), (3, 1, 4, 4), (2, 3, 1, 8)]:
        for dim in range(4):
            ids = torch.arange(shape[dim]).reshape([-1 if d == dim else 1 for d in range(4)]).expand(shape)
            dense = ids.contiguous(memory_format=fmt)
            storage = dense.as_strided((dense.numel(),), (1,)).tolist()  # values in storage order
            step = dense.stride(dim) if shape[dim] > 1 else 1
            for vec in (1, 2, 4, 8):
                if dense.numel() % vec == 0:
                    assert _kernel_bias_indices(dense.numel(), vec, step, shape[dim]) == storage, (shape, dim, vec)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", list(ACTS))
def test_cuda_matches_cpu(act, dtype):
    for i, (shape, dim) in enumerate(SHAPES + [((2, 6, 5, 8), 1)]):
        x, b = make_inputs(shape, dim=dim, seed=30 + i, dtype=dtype)
        clamp = 0.75 if i % 2 else None
        exp = op(x, b, dim, act, None, None, clamp)
        torch.testing.assert_close(op(x.cuda(), b.cuda(), dim, act, None, None, clamp).cpu(), exp, **TOL[dtype])
        alpha, gain, c = resolved(act, clamp)
        g = torch.randn(shape).to(dtype)
        for order in (1, 2):
            cpu = bwd_op(g, x, b, exp, dim, act, alpha, gain, c, order)
            cuda = bwd_op(g.cuda(), x.cuda(), b.cuda(), exp.cuda(), dim, act, alpha, gain, c, order)
            torch.testing.assert_close(cuda.cpu(), cpu, **TOL[dtype])


@pytest.mark.cuda
def test_cuda_layouts_misaligned_and_second_order():
    x, b = make_inputs((2, 8, 16, 16), seed=40)
    flat = torch.empty(x.numel() + 1, device="cuda")[1:]
    shifted = flat.view(x.shape)
    shifted.copy_(x.cuda())
    assert shifted.data_ptr() % 16 != 0
    # the scalar path (misaligned) and the vector path compute alike; exp may differ from the CPU's by an ulp
    misaligned = op(shifted, b.cuda(), 1, "swish")
    torch.testing.assert_close(misaligned, op(x.cuda(), b.cuda(), 1, "swish"), rtol=0, atol=0)
    torch.testing.assert_close(misaligned.cpu(), op(x, b, 1, "swish"), **TOL[torch.float32])
    cl = x.cuda().contiguous(memory_format=torch.channels_last)
    out = op(cl, b.cuda(), 1, "lrelu", None, None, 0.5)
    assert out.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out.cpu(), op(x, b, 1, "lrelu", None, None, 0.5), rtol=0, atol=0)
    for act in SECOND_ORDER:
        xd, bd = make_inputs((2, 3, 4, 4), seed=41, dtype=torch.float64)
        xd, bd = xd.cuda().requires_grad_(True), bd.cuda().requires_grad_(True)
        assert torch.autograd.gradgradcheck(lambda t, c: op(t, c, 1, act, None, None, None), (xd, bd))


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    import importlib

    module = importlib.import_module("mmcv.ops.bias_act")
    x, b = make_inputs((2, 3, 4, 4), seed=50, dtype=torch.float64)
    for act in ACTS:
        exp = op(x, b, 1, act, None, None, 1.0)
        torch.testing.assert_close(ops.bias_act(x, b, act=act, clamp=1.0), exp, rtol=0, atol=0)
        torch.testing.assert_close(module.bias_act(x, b, 1, act, None, None, 1.0, True), exp, rtol=0, atol=0)
        # mmcv's own composite agrees (its Python, untouched)
        torch.testing.assert_close(module._bias_act_ref(x, b, 1, act, None, None, 1.0), exp, rtol=1e-12, atol=1e-12)
    # second order through the bridge
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(ops.bias_act(xg, b, act="tanh").square().sum(), xg, create_graph=True)
    assert g.requires_grad
    # mmcv's ext kernel contract: (x, b, xref, yref, dy, grad, dim, act index, alpha, gain, clamp)
    empty = x.new_empty(0)
    ext = module.ext_module
    y = op(x, b, 1, "swish", None, None, 1.0)
    torch.testing.assert_close(ext.bias_act(x, b, empty, empty, empty, 0, 1, 9, 0.0, SQRT2, 1.0), y, rtol=0, atol=0)
    dy = torch.randn_like(x)
    torch.testing.assert_close(
        ext.bias_act(dy, b, x, y, empty, 1, 1, 9, 0.0, SQRT2, 1.0),
        bwd_op(dy, x, b, y, 1, "swish", 0.0, SQRT2, 1.0, 1),
        rtol=0,
        atol=0,
    )
    d_dx = torch.randn_like(x)
    torch.testing.assert_close(
        ext.bias_act(d_dx, b, x, y, dy, 2, 1, 9, 0.0, SQRT2, 1.0),
        bwd_op(d_dx * dy, x, b, y, 1, "swish", 0.0, SQRT2, 1.0, 2),
        rtol=0,
        atol=0,
    )
