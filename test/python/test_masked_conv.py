"""Tests of mmops::masked_conv2d (mmcv's MaskedConv2d): the conformance cases, an independent
float64 reference (torch conv2d, then zero outside the mask), hand-computed vectors, mmcv's
own test call, gradcheck, mask placement rules, bad inputs, the module and CUDA tests."""

import math

import pytest
import torch
import torch.nn.functional as F
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL

import mmops

op = torch.ops.mmops.masked_conv2d
backward_op = torch.ops.mmops._masked_conv2d_backward

# --------------------------------------------------------------------------- reference


def out_size(size, k, p, s):
    return (size + 2 * p - k) // s + 1


def reference(x, mask, weight, bias=None, padding=(0, 0), stride=(1, 1)):
    """Plain torch, float64, differentiable: the full convolution, then zero (no bias) at the
    output positions where mask <= 0; the mask indexes the output grid from (0, 0), positions
    beyond either grid are dropped."""
    out = F.conv2d(x.double(), weight.double(), None if bias is None else bias.double(), stride=stride, padding=padding)
    n, _, oh, ow = out.shape
    keep = torch.zeros(n, oh, ow, dtype=torch.bool, device=x.device)
    hm, wm = min(mask.size(1), oh), min(mask.size(2), ow)
    keep[:, :hm, :wm] = mask[:, :hm, :wm] > 0
    return torch.where(keep[:, None], out, torch.zeros((), dtype=out.dtype, device=out.device))


def make_inputs(n, c, h, w, o, k, padding=1, stride=1, density=0.5, seed=0, dtype=torch.float64, mask_like="output"):
    """Random inputs; the mask is positive at about `density` of its positions."""
    g = torch.Generator().manual_seed(seed)
    kh, kw = (k, k) if isinstance(k, int) else k
    p = (padding, padding) if isinstance(padding, int) else tuple(padding)
    s = (stride, stride) if isinstance(stride, int) else tuple(stride)
    oh, ow = out_size(h, kh, p[0], s[0]), out_size(w, kw, p[1], s[1])
    mh, mw = (oh, ow) if mask_like == "output" else (h, w)
    x = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    mask = torch.rand(n, mh, mw, generator=g, dtype=torch.float64) - (1 - density)
    weight = torch.randn(o, c, kh, kw, generator=g, dtype=torch.float64) / math.sqrt(max(c * kh * kw, 1))
    bias = torch.randn(o, generator=g, dtype=torch.float64)
    return [t.to(dtype) for t in (x, mask, weight, bias)], list(p), list(s)


# (n, c, h, w, o, k, padding, stride, mask_like)
CASES = [
    (1, 3, 16, 16, 3, 3, 1, 1, "input"),  # mmcv's configuration: batch 1, "same" padding
    (2, 4, 7, 9, 5, 3, 1, 1, "output"),
    (2, 5, 8, 6, 3, (3, 1), (1, 0), 1, "input"),
    (3, 2, 9, 10, 4, (2, 3), (0, 1), (2, 1), "output"),
    (1, 6, 11, 8, 2, 1, 0, 1, "input"),  # guided anchoring's 1x1 heads
    (2, 3, 6, 7, 4, 5, 2, 3, "output"),
    (1, 3, 16, 16, 3, 3, 0, 1, "input"),  # mmcv's test: padding 0, mask larger than the output
    (1, 2, 5, 5, 3, 1, 2, 1, "input"),  # mask smaller than the output (padding > (k - 1) / 2)
]


# --------------------------------------------------------------------------- conformance

P1 = [1, 1]


def _sample(sizes, c=4, o=5, k=3, padding=1, stride=1, mask_like="output", seed=10):
    def sample(device, dtype, size):
        n, h, w = sizes[size]
        (x, mask, weight, bias), p, s = make_inputs(
            n, c, h, w, o, k, padding, stride, seed=seed + size, dtype=dtype, mask_like=mask_like
        )
        return Sample((x.to(device), mask.to(device), weight.to(device), bias.to(device), p, s))

    return sample


def _empty(device, dtype):
    samples = []
    (x, mask, weight, bias), p, s = make_inputs(0, 4, 6, 7, 5, 3, dtype=dtype)
    samples.append(((x, mask, weight, bias, p, s), (0, 5, 6, 7)))  # empty batch
    (x, mask, _, _), p, s = make_inputs(2, 4, 6, 7, 5, 3, dtype=dtype)
    samples.append(((x, mask, torch.randn(0, 4, 3, 3, dtype=dtype), None, p, s), (2, 0, 6, 7)))  # no outputs
    (x, mask, weight, bias), p, s = make_inputs(2, 4, 0, 7, 5, 1, padding=(1, 0), dtype=dtype)
    samples.append(((x, mask, weight, bias, p, s), (2, 5, 2, 7)))  # empty input plane (padding only)
    to = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    return [Sample(tuple(to(a) for a in args), out_shapes=[shape]) for args, shape in samples]


def _cuda_samples(dtype):
    for i, (n, c, h, w, o, k, p, s, like) in enumerate(CASES):
        (x, mask, weight, bias), p, s = make_inputs(n, c, h, w, o, k, p, s, seed=40 + i, dtype=dtype, mask_like=like)
        yield Sample((x, mask, weight, bias, p, s))


def _helpers(sample):
    x, mask, weight, bias, p, s = sample.args
    go = torch.randn_like(op(*sample.args))
    return [
        (backward_op, (go, x, mask, weight, p, s, [True, True, True])),
        (backward_op, (go, x, mask, weight, p, s, [False, True, False])),
    ]


class _Net(torch.nn.Module):
    """masked_conv2d in a model: the op on computed inputs and MaskedConv2d (4 -> 5 channels,
    3x3, padding 1) with the sample's mask."""

    def __init__(self):
        super().__init__()
        self.conv = mmops.MaskedConv2d(4, 5, 3, padding=1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
        a = torch.ops.mmops.masked_conv2d(x * 1.5, mask, weight, bias, [1, 1], [1, 1])
        b = self.conv(x, mask)
        return a.sin() + b, torch.ops.mmops.masked_conv2d(x, mask - 0.25, weight, None, [1, 1], [1, 1])


class _ModuleNet(torch.nn.Module):
    """MaskedConv2d with and without a mask (the plain path is nn.Conv2d's); TorchScript only."""

    def __init__(self):
        super().__init__()
        self.conv = mmops.MaskedConv2d(4, 5, 3, padding=1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
        op_out = torch.ops.mmops.masked_conv2d(x, mask, weight, bias, [1, 1], [1, 1])
        return self.conv(x, mask) + self.conv(x) * (mask > 0).unsqueeze(1) + op_out, self.conv(x, None)


def _good():
    (x, mask, weight, bias), p, s = make_inputs(2, 4, 6, 6, 5, 3, dtype=torch.float32)
    return x, mask, weight, bias


# name: (make(x, mask, weight, bias) -> the op's arguments, message, raises on meta too)
BAD = {
    "input_3d": (lambda x, m, w, b: (x[0], m, w, b, P1, P1), "expected input to be a 4-D tensor", True),
    "int_input": (
        lambda x, m, w, b: (x.int(), m, w.int(), None, P1, P1),
        "expected input to have a floating point dtype",
        True,
    ),
    "weight_dtype": (
        lambda x, m, w, b: (x, m, w.double(), b, P1, P1),
        r"expected weight to have the dtype of input \(Float\), but got Double",
        True,
    ),
    "weight_3d": (lambda x, m, w, b: (x, m, w[0], b, P1, P1), "expected weight to be a 4-D tensor", True),
    "weight_channels": (
        lambda x, m, w, b: (x, m, w[:, :3], b, P1, P1),
        r"expected weight of shape \[O, C = 4, kh, kw\] \(C: the input channels\), but got \[5, 3, 3, 3\]",
        True,
    ),
    "kernel_zero": (lambda x, m, w, b: (x, m, w[:, :, :0], b, P1, P1), "expected a positive kernel size", True),
    "bias_dtype": (
        lambda x, m, w, b: (x, m, w, b.double(), P1, P1),
        "expected bias to have the dtype of input",
        True,
    ),
    "bias_shape": (lambda x, m, w, b: (x, m, w, b[:4], P1, P1), r"expected bias of shape \[5\] \(\[O\]\)", True),
    "bias_2d": (lambda x, m, w, b: (x, m, w, b[None], P1, P1), "expected bias to be a 1-D tensor", True),
    "mask_2d": (lambda x, m, w, b: (x, m[0], w, b, P1, P1), "expected mask to be a 3-D tensor", True),
    "mask_batch": (
        lambda x, m, w, b: (x, m[:1], w, b, P1, P1),
        r"expected mask of shape \[N, H_out, W_out\] = \[2, 6, 6\] or the input's \[N, H, W\], but got \[1, 6, 6\]",
        True,
    ),
    "mask_plane": (lambda x, m, w, b: (x, m[:, :5], w, b, P1, P1), r"expected mask of shape .* \[2, 5, 6\]", True),
    "mask_input_size_strided": (
        lambda x, m, w, b: (x, m, w, b, P1, [2, 2]),
        r"expected mask of shape \[N, H_out, W_out\] = \[2, 3, 3\] \(stride > 1: the output's size\)",
        True,
    ),
    "mask_complex": (
        lambda x, m, w, b: (x, m.to(torch.complex64), w, b, P1, P1),
        "expected mask to have a real",
        True,
    ),
    "padding_negative": (lambda x, m, w, b: (x, m, w, b, [-1, 1], P1), "padding values must be non-negative", True),
    "padding_huge": (lambda x, m, w, b: (x, m, w, b, [2**40, 1], P1), "padding values must be .* at most", True),
    "padding_three": (lambda x, m, w, b: (x, m, w, b, [1, 1, 1], P1), "expected padding to hold 2 values", True),
    "stride_zero": (lambda x, m, w, b: (x, m, w, b, P1, [0, 1]), "stride values must be positive", True),
    "too_small": (
        lambda x, m, w, b: (x[:, :, :1, :1], m[:, :1, :1], w, b, [0, 0], P1),
        r"expected a positive output size, but the input \(H, W\) = \(1, 1\) with padding \[0, 0\] is smaller",
        True,
    ),
}


def _bad_inputs():
    return {
        key: BadInput(lambda *_, make=make: make(*_good()), f"mmops::masked_conv2d: .*{match}", meta=meta)
        for key, (make, match, meta) in BAD.items()
    }


_SIZES = ((2, 10, 11), (3, 12, 9))  # (n, h, w): every size differs (one dynamo symbol each)
CONFORMANCE = [
    ConformanceCase(
        "masked_conv2d",
        op,
        _sample(_SIZES, mask_like="input"),
        grad_args=(0, 2, 3),
        feature_args=(0,),
        empty=_empty,
        bad_inputs=_bad_inputs(),
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cpu_float32_reference=True,
        nonzero_grads=True,
    ),
    ConformanceCase(
        "masked_conv2d_modules",
        op,
        _sample(((2, 8, 8),) * 2, seed=16),
        dtype=torch.float64,
        dtypes=(),
        grad_args=(0, 2, 3),
        module=_ModuleNet,
        module_tests=("torchscript",),
        script_tol=dict(rtol=0, atol=1e-12),
        script_grad_tol=dict(rtol=0, atol=1e-12),
    ),
    ConformanceCase(
        "masked_conv2d_strided",
        op,
        _sample(((2, 9, 8), (1, 11, 7)), k=(3, 2), padding=(1, 0), stride=(2, 3), seed=3),
        dtypes=(),
        grad_args=(0, 2, 3),
        feature_args=(0,),
        helpers=_helpers,
    ),
]


class TestMaskedConvConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- values


def call(x, mask, weight, bias, p, s):
    return op(x, mask, weight, bias, list(p), list(s))


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:6])) + f"-{c[8]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("with_bias", [True, False])
def test_matches_reference(case, dtype, with_bias):
    n, c, h, w, o, k, p, s, like = case
    (x, mask, weight, bias), p, s = make_inputs(n, c, h, w, o, k, p, s, seed=7, dtype=dtype, mask_like=like)
    bias = bias if with_bias else None
    out = call(x, mask, weight, bias, p, s)
    expected = reference(x, mask, weight, bias, p, s)
    assert out.dtype == dtype and out.is_contiguous()
    torch.testing.assert_close(out.double(), expected, **TOL[dtype])


@pytest.mark.parametrize("density", [0.0, 0.05, 1.0])
def test_mask_densities(density):
    (x, mask, weight, bias), p, s = make_inputs(2, 3, 9, 8, 4, 3, density=density, seed=2)
    out = call(x, mask, weight, bias, p, s)
    torch.testing.assert_close(out, reference(x, mask, weight, bias, p, s), rtol=1e-12, atol=1e-12)
    if density == 0.0:
        assert torch.equal(out, torch.zeros_like(out))  # no bias where nothing is masked


def test_known_vector():
    # Hand-computed: 3x3 ramp 0..8, a 3x3 all-ones kernel, padding 1, bias 0.5, mask at (0, 0)
    # and (1, 1): (0, 0) sums the top-left 2x2 block 0 + 1 + 3 + 4 = 8, (1, 1) sums all = 36.
    x = torch.arange(9, dtype=torch.float64).view(1, 1, 3, 3)
    mask = torch.zeros(1, 3, 3, dtype=torch.float64)
    mask[0, 0, 0] = mask[0, 1, 1] = 1.0
    mask[0, 2, 2] = -1.0  # not > 0
    out = op(x, mask, torch.ones(1, 1, 3, 3, dtype=torch.float64), torch.tensor([0.5], dtype=torch.float64), [1, 1])
    expected = torch.zeros(1, 1, 3, 3, dtype=torch.float64)
    expected[0, 0, 0, 0], expected[0, 0, 1, 1] = 8.5, 36.5
    assert torch.equal(out, expected)


def test_mmcv_test_call():
    # mmcv's test_masked_conv2d: randn input [1, 3, 16, 16] and mask [1, 16, 16], MaskedConv2d(3, 3, 3)
    # (padding 0: a 14x14 output; mmcv writes the mask's last rows and columns out of range, we drop them).
    torch.manual_seed(0)
    x, mask = torch.randn(1, 3, 16, 16), torch.randn(1, 16, 16)
    conv = mmops.MaskedConv2d(3, 3, 3)
    out = conv(x, mask)
    assert out.shape == (1, 3, 14, 14)
    torch.testing.assert_close(out.double(), reference(x, mask, conv.weight, conv.bias), **TOL[torch.float32])


def test_mask_dtypes_and_nan():
    (x, mask, weight, bias), p, s = make_inputs(2, 3, 6, 6, 4, 3, seed=5)
    expected = call(x, mask, weight, bias, p, s)
    positive = mask > 0
    for m in (positive, positive.to(torch.uint8), positive.int(), mask.float(), mask.half()):
        assert torch.equal(call(x, m, weight, bias, p, s), expected), m.dtype
    nan_mask = torch.where(positive, mask, torch.full_like(mask, float("nan")))
    assert torch.equal(call(x, nan_mask, weight, bias, p, s), expected)  # NaN is not > 0


def test_nan_input_stays_local():
    # Unlike "conv2d then multiply by the mask", a NaN only reaches the masked positions it touches.
    (x, mask, weight, bias), p, s = make_inputs(1, 2, 8, 8, 3, 3, seed=6)
    x[0, 0, 0, 0] = float("nan")
    out = call(x, mask, weight, bias, p, s)
    hit = torch.zeros(1, 8, 8, dtype=torch.bool)
    hit[0, :2, :2] = mask[0, :2, :2] > 0
    assert torch.isnan(out).any(dim=1).eq(hit).all()


@pytest.mark.parametrize("density", [0.05, 0.5])  # the CPU's gathered GEMM and its dense path
def test_nonfinite_input_gradients_stay_local(density):
    # An Inf input pixel reaches grad_weight only at the taps through which a selected position
    # reads it (the dense path would add 0 * Inf from unselected ones: it is not taken then).
    (x, mask, weight, bias), p, s = make_inputs(1, 2, 8, 8, 3, 3, density=density, seed=6)
    assert p == [1, 1] and s == [1, 1]
    x[0, 1, 4, 4] = float("inf")
    leaves = [t.detach().clone().requires_grad_(True) for t in (x, weight, bias)]
    grads = torch.autograd.grad(call(leaves[0], mask, leaves[1], leaves[2], p, s), leaves, torch.ones(1, 3, 8, 8))
    reads = torch.zeros(3, 3, dtype=torch.bool)  # tap (i, j) of output (5 - i, 5 - j) reads pixel (4, 4)
    for i in range(3):
        for j in range(3):
            reads[i, j] = bool(mask[0, 5 - i, 5 - j] > 0)
    assert torch.equal(~torch.isfinite(grads[1][:, 1]), reads.expand(3, 3, 3))
    assert torch.isfinite(grads[1][:, 0]).all() and torch.isfinite(grads[0]).all() and torch.isfinite(grads[2]).all()


def test_noncontiguous_inputs():
    (x, mask, weight, bias), p, s = make_inputs(2, 4, 7, 9, 5, 3, seed=8)
    expected = call(x, mask, weight, bias, p, s)
    wide = torch.randn(2, 8, 7, 18, dtype=torch.float64)
    wide[:, ::2, :, ::2] = x
    xs = wide[:, ::2, :, ::2]
    assert not xs.is_contiguous()
    for xi in (xs, x.contiguous(memory_format=torch.channels_last)):
        torch.testing.assert_close(
            call(
                xi,
                mask.transpose(1, 2).contiguous().transpose(1, 2),
                weight.transpose(2, 3).contiguous().transpose(2, 3),
                bias,
                p,
                s,
            ),
            expected,
        )


def test_zero_input_channels():
    x = torch.randn(2, 0, 5, 6, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(2, 5, 6, dtype=torch.float64) - 0.5
    weight = torch.randn(3, 0, 3, 3, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, dtype=torch.float64, requires_grad=True)
    out = op(x, mask, weight, bias, [1, 1])
    expected = torch.where((mask > 0)[:, None], bias.detach().view(1, 3, 1, 1), torch.zeros(()).double())
    assert torch.equal(out, expected.expand(2, 3, 5, 6))
    out.sum().backward()
    assert x.grad.shape == x.shape and weight.grad.shape == weight.shape
    assert torch.equal(bias.grad, (mask > 0).sum().double().expand(3))


@pytest.mark.parametrize("budget", ["1", "700"])
def test_chunked_positions_match(monkeypatch, budget):
    # A column budget of 1 byte: one position per chunk; 700: a few positions.
    (x, mask, weight, bias), p, s = make_inputs(2, 3, 7, 6, 4, 3, seed=17)
    go = torch.randn(2, 4, 7, 6, dtype=torch.float64)

    def run():
        leaves = [t.detach().clone().requires_grad_(True) for t in (x, weight, bias)]
        out = call(leaves[0], mask, leaves[1], leaves[2], p, s)
        return [out.detach(), *torch.autograd.grad(out, leaves, go)]

    whole = run()
    monkeypatch.setenv("MMOPS_MASKED_CONV_COLUMN_BYTES", budget)
    for a, b in zip(run(), whole):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("case", CASES[1:6], ids=lambda c: "x".join(map(str, c[:6])))
def test_gradcheck(case):
    n, c, h, w, o, k, p, s, like = case
    (x, mask, weight, bias), p, s = make_inputs(
        min(n, 2),
        min(c, 3),
        min(h, 7),
        min(w, 7),
        min(o, 3),
        k,
        p,
        s,
        seed=9,
        mask_like=like if s == [1, 1] or like == "output" else "output",
    )
    x, weight, bias = (t.requires_grad_(True) for t in (x, weight, bias))
    assert torch.autograd.gradcheck(lambda a, b, cc: call(a, mask, b, cc, p, s), (x, weight, bias), fast_mode=True)


@pytest.mark.parametrize("density", [0.05, 0.5])  # the CPU's gathered GEMM and its dense path
def test_gradients_match_reference(density):
    (x, mask, weight, bias), p, s = make_inputs(2, 4, 9, 8, 5, 3, density=density, seed=11, mask_like="input")
    go = torch.randn(2, 5, 9, 8, dtype=torch.float64)
    grads = []
    for fn in (call, reference):
        leaves = [t.detach().clone().requires_grad_(True) for t in (x, weight, bias)]
        out = fn(leaves[0], mask, leaves[1], leaves[2], p, s)
        grads.append(torch.autograd.grad(out, leaves, go))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_mask_gets_no_gradient():
    (x, mask, weight, bias), p, s = make_inputs(1, 3, 6, 6, 2, 3, seed=12)
    mask.requires_grad_(True)  # as in mmcv's test
    x.requires_grad_(True)
    call(x, mask, weight, bias, p, s).sum().backward()
    assert mask.grad is None and x.grad is not None


def test_double_backward_raises():
    (x, mask, weight, bias), p, s = make_inputs(1, 2, 5, 5, 2, 3, seed=13)
    x.requires_grad_(True)
    out = call(x, mask, weight, bias, p, s)
    go = torch.randn_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="mmops::masked_conv2d: double backward is not implemented"):
        torch.autograd.grad(out, x, go, create_graph=True)


def test_backward_helper_checks():
    x, mask, weight, _ = _good()
    go = torch.randn(2, 5, 6, 6)
    with pytest.raises(RuntimeError, match=r"expected grad_output of shape \[N, O, H_out, W_out\] = \[2, 5, 6, 6\]"):
        backward_op(go[:, :4], x, mask, weight, P1, P1, [True] * 3)
    with pytest.raises(RuntimeError, match="expected grad_output to have the dtype of input"):
        backward_op(go.double(), x, mask, weight, P1, P1, [True] * 3)
    gi, gw, gb = backward_op(go, x, mask, weight, P1, P1, [False, True, False])
    assert gi.shape == (0,) and gw.shape == weight.shape and gb.shape == (0,)


# --------------------------------------------------------------------------- Python API


def test_functional_and_module():
    (x, mask, weight, bias), p, s = make_inputs(1, 3, 8, 8, 4, 3, dtype=torch.float32, seed=14, mask_like="input")
    torch.testing.assert_close(mmops.masked_conv2d(x, mask, weight, bias, 1), call(x, mask, weight, bias, p, s))
    conv = mmops.MaskedConv2d(3, 4, 3, padding=1)
    assert isinstance(conv, torch.nn.Conv2d)
    torch.testing.assert_close(conv(x), F.conv2d(x, conv.weight, conv.bias, padding=1))
    torch.testing.assert_close(conv(x, mask), torch.where((mask > 0)[:, None], conv(x), torch.zeros(())))
    strided = mmops.MaskedConv2d(3, 4, 3, stride=2, padding=1)
    m2 = torch.rand(1, 4, 4) - 0.5
    torch.testing.assert_close(strided(x, m2), torch.where((m2 > 0)[:, None], strided(x), torch.zeros(())))
    with pytest.raises(ValueError, match="dilation 1, groups 1"):
        mmops.MaskedConv2d(3, 4, 3, dilation=2)(x, mask)
    with pytest.raises(ValueError, match="padding must be an int or a pair"):
        mmops.MaskedConv2d(3, 4, 3, padding="same")
    scripted = torch.jit.script(conv)
    torch.testing.assert_close(scripted(x, mask), conv(x, mask))
    torch.testing.assert_close(scripted(x), conv(x))


def test_autocast_mixed_dtypes():
    (x, mask, weight, bias), p, s = make_inputs(1, 3, 6, 6, 2, 3, dtype=torch.float32, seed=15)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = call(x.bfloat16(), mask, weight, bias, p, s)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), call(x.bfloat16().float(), mask, weight, bias, p, s), **TOL[torch.bfloat16])


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_cuda_guided_anchoring_shape_matches_cpu(dtype):
    # C 256, 3x3, a 50x76 map, 5% of the positions: forward and gradients against CPU float64.
    (x, mask, weight, bias), p, s = make_inputs(1, 256, 50, 76, 32, 3, density=0.05, seed=20, mask_like="input")
    go = torch.randn(1, 32, 50, 76, dtype=torch.float64)
    results = []
    for device, dt in (("cpu", torch.float64), ("cuda", dtype)):
        leaves = [t.to(device, dt).requires_grad_(True) for t in (x, weight, bias)]
        out = call(leaves[0], mask.to(dtype).to(device, dt), leaves[1], leaves[2], p, s)  # one rounding
        grads = torch.autograd.grad(out, leaves, go.to(device, dt))
        results.append([t.double().cpu() for t in (out, *grads)])
    tol = dict(rtol=5e-2, atol=5e-2) if dtype in (torch.float16, torch.bfloat16) else dict(rtol=1e-4, atol=1e-4)
    for what, a, b in zip(("output", "grad_input", "grad_weight", "grad_bias"), results[1], results[0]):
        scale = 1.0 if what in ("output", "grad_input") else max(b.abs().max().item(), 1.0)
        torch.testing.assert_close(a / scale, b / scale, **tol, msg=lambda m, what=what: f"{what}: {m}")


@pytest.mark.cuda
def test_cuda_empty_mask_and_stream():
    (x, mask, weight, bias), p, s = make_inputs(2, 4, 9, 9, 3, 3, density=0.0, dtype=torch.float32)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        out = call(x.cuda(), mask.cuda(), weight.cuda(), bias.cuda(), p, s)
    stream.synchronize()
    assert torch.equal(out.cpu(), torch.zeros(2, 3, 9, 9))
