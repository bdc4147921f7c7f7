"""Tests of mmops::filtered_lrelu: the conformance cases, then the float64 composite
(filtered_lrelu_reference.py), hand-computed vectors, the mask, gradcheck and gradgradcheck
(input and bias; the gradient differentiable again w.r.t. the incoming gradient), the
backward op against its adjoint, the Python wrapper's mmcv conventions, an emulation of the
CUDA tile arithmetic, CUDA == CPU and the mmcv bridge."""

import importlib
import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample, magnitude_tolerance
from conftest import TOL, run_with_default_cpu_capability
from filtered_lrelu_reference import filtered_lrelu_mmcv_ref, filtered_lrelu_ref

import mmops

op = torch.ops.mmops.filtered_lrelu
forward_op = torch.ops.mmops._filtered_lrelu_forward
backward_op = torch.ops.mmops._filtered_lrelu_backward
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SQRT2 = math.sqrt(2)


def make_input(n, c, h, w, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, c, h, w, generator=g, dtype=torch.float64).to(dtype)


def make_filter(fh, fw, seed=0, dtype=torch.float32):
    """A random filter with a positive mean (a low-pass-like filter keeps signs mixed)."""
    g = torch.Generator().manual_seed(1000 + seed)
    f = torch.randn(fh, fw, generator=g, dtype=torch.float64) * 0.5 + 1.0
    return (f / f.sum()).to(dtype)


def make_bias(c, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(2000 + seed)
    return (torch.randn(c, generator=g, dtype=torch.float64) * 0.5).to(dtype)


def args_of(x, fu, fd, bias, up, down, pad, gain=SQRT2, slope=0.2, clamp=None):
    return (x, fu, fd, bias, up, down, pad, gain, slope, clamp)


# --------------------------------------------------------------------------- conformance

# name: (up, down, padding, filter_up shape, filter_down shape, clamp)
CONFIGS = {
    # StyleGAN3's up 2 / down 2 layers (short filters here), a clamp
    "filtered_lrelu_up2_down2": (2, 2, [3, 3, 3, 3], (4, 4), (4, 4), 0.8),
    # a critically sampled layer: up 1 / down 1, no clamp
    "filtered_lrelu_critical": (1, 1, [1, 1, 1, 1], (3, 3), (2, 2), None),
    # other factors, non-square filters, negative padding
    "filtered_lrelu_general": (3, 2, [2, -1, -2, 3], (3, 5), (4, 2), 1.5),
}


def _sample_of(config):
    up, down, pad, fu_shape, fd_shape, clamp = CONFIGS[config]

    def sample(device, dtype, size):
        n, c, h, w = (2, 3, 5, 6) if size == 0 else (3, 2, 6, 8)
        x = make_input(n, c, h, w, seed=size, dtype=dtype).to(device)
        fu = make_filter(*fu_shape, seed=size, dtype=dtype).to(device)
        fd = make_filter(*fd_shape, seed=size + 10, dtype=dtype).to(device)
        bias = make_bias(c, seed=size, dtype=dtype).to(device)
        return Sample(args_of(x, fu, fd, bias, up, down, pad, SQRT2, 0.2, clamp))

    return sample


def _helpers(sample):
    x, fu, fd, bias, up, down, pad, gain, slope, clamp = sample.args
    out, mask = forward_op(*sample.args)
    size = list(x.shape[2:])
    common = (fu, fd, up, down, pad, gain, slope, size)
    return [
        (forward_op, sample.args),
        (backward_op, (torch.randn_like(out), mask, *common, False)),
        (backward_op, (torch.randn_like(x), mask, *common, True)),
    ]


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    fu, fd = torch.ones(2, 2, **f), torch.ones(2, 2, **f)
    return [
        Sample(
            args_of(torch.randn(0, 3, 4, 5, **f), fu, fd, torch.zeros(3, **f), 2, 2, [1, 1, 1, 1]),
            out_shapes=[(0, 3, 4, 5)],
        ),
        Sample(
            args_of(torch.randn(2, 0, 4, 5, **f), fu, fd, torch.zeros(0, **f), 1, 1, [0, 0, 0, 0]),
            out_shapes=[(2, 0, 2, 3)],
        ),
        # no input rows: the output reads only the zero padding
        Sample(args_of(torch.randn(1, 2, 0, 3, **f), fu, fd, None, 1, 1, [0, 0, 2, 2]), out_shapes=[(1, 2, 2, 1)]),
    ]


# CUDA paths: fused tiles (StyleGAN3's 12-tap up 2 / down 2, critically sampled 1 / 1, several
# tiles and partial ones, every factor), generic (filters too large for a tile)
CUDA_SHAPES = [  # (N, C, H, W, fu, fd, up, down, pad, clamp)
    (2, 4, 36, 20, (12, 12), (12, 12), 2, 2, [10, 10, 10, 10], 1.0),
    (1, 3, 40, 45, (6, 6), (6, 6), 1, 1, [5, 5, 5, 5], None),
    (2, 2, 17, 33, (4, 4), (1, 1), 2, 1, [2, 1, 2, 1], 0.5),
    (1, 2, 30, 23, (1, 1), (4, 4), 1, 2, [1, 1, 1, 1], None),
    (1, 3, 9, 11, (5, 7), (3, 2), 3, 2, [3, -2, -1, 4], 2.0),
    (1, 2, 6, 7, (90, 90), (2, 3), 1, 1, [45, 45, 45, 45], None),
]


def _cuda_samples(dtype):
    for i, shape in enumerate(CUDA_SHAPES):
        yield Sample(_args(i, shape, dtype, input_seed=50 + i))


class _Net(torch.nn.Module):
    """filtered_lrelu in a model: FilteredLReLU, the functional wrapper and the op."""

    def __init__(self, up, down, pad, clamp):
        super().__init__()
        self.up, self.down, self.pad, self.clamp = up, down, pad, clamp
        self.layer = mmops.FilteredLReLU(torch.tensor([1.0, 3.0, 3.0, 1.0]) / 8, None, up=2, padding=2, clamp=256.0)

    def forward(self, x: torch.Tensor, fu: torch.Tensor, fd: torch.Tensor, bias: torch.Tensor):
        a = torch.ops.mmops.filtered_lrelu(x * 2.0, fu, fd, bias, self.up, self.down, self.pad, 1.5, 0.1, self.clamp)
        b = mmops.filtered_lrelu(x.sin(), fu, fd, bias, self.up, self.down, self.pad, clamp=self.clamp)
        return a + b, self.layer(x, bias)


def _message(text):
    return f"mmops::filtered_lrelu: .*{text}"


def _change(i, value):
    def make(*args):
        args = list(args)
        args[i] = value(args) if callable(value) else value
        return tuple(args)

    return make


def _bad_inputs():
    return {
        "input_3d": BadInput(_change(0, lambda a: a[0][0]), _message("input to be a 4-D"), meta=True),
        "int_input": BadInput(_change(0, lambda a: a[0].int()), _message("input to have a float"), meta=True),
        "filter_up_1d": BadInput(_change(1, lambda a: a[1][0]), _message("filter_up to be a 2-D"), meta=True),
        "filter_down_3d": BadInput(_change(2, lambda a: a[2][None]), _message("filter_down to be a 2-D"), meta=True),
        "filter_up_empty": BadInput(_change(1, lambda a: a[1][:0]), _message("non-empty filter_up"), meta=True),
        "int_filter_down": BadInput(
            _change(2, lambda a: a[2].int()), _message("filter_down to have a float"), meta=True
        ),
        "bias_2d": BadInput(_change(3, lambda a: a[3][None]), _message("bias to be a 1-D"), meta=True),
        "bias_size": BadInput(_change(3, lambda a: a[3][:1]), _message("bias of shape \\[C\\] = \\[3\\]"), meta=True),
        "bias_dtype": BadInput(_change(3, lambda a: a[3].double()), _message("bias to have input's dtype"), meta=True),
        "up_0": BadInput(_change(4, 0), _message("up in \\[1, 2\\^16\\]"), meta=True),
        "down_huge": BadInput(_change(5, 2**20), _message("down in \\[1, 2\\^16\\]"), meta=True),
        "padding_3": BadInput(_change(6, [0, 0, 0]), _message("padding to hold 4 values"), meta=True),
        "padding_huge": BadInput(_change(6, [0, 2**41, 0, 0]), _message("padding values"), meta=True),
        "gain_0": BadInput(_change(7, 0.0), _message("finite gain > 0"), meta=True),
        "slope_negative": BadInput(_change(8, -0.1), _message("finite slope >= 0"), meta=True),
        "clamp_negative": BadInput(_change(9, -1.0), _message("clamp to be None or >= 0"), meta=True),
        "cropped_away": BadInput(_change(6, [0, 0, -30, -30]), _message("output of at least 1 x 1"), meta=True),
        "filter_down_too_large": BadInput(
            _change(2, lambda a: torch.ones(60, 2, dtype=a[0].dtype)), _message("at least filter_down")
        ),
    }


CONFORMANCE = [
    ConformanceCase(
        name,
        op,
        _sample_of(name),
        grad_args=(0, 3),
        feature_args=(0,),
        empty=_empty if name == "filtered_lrelu_up2_down2" else None,
        module=(lambda cfg=CONFIGS[name]: _Net(cfg[0], cfg[1], cfg[2], cfg[5]))
        if name == "filtered_lrelu_up2_down2"
        else None,
        helpers=_helpers if name == "filtered_lrelu_general" else None,
        cuda_samples=_cuda_samples if name == "filtered_lrelu_up2_down2" else None,
        cuda_tol=magnitude_tolerance,
        nonzero_grads=True,
        bad_inputs=_bad_inputs() if name == "filtered_lrelu_general" else {},
    )
    for name in CONFIGS
]


class TestFilteredLreluConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- values

# (N, C, H, W, fu, fd, up, down, pad, clamp)
SHAPES = [
    (2, 3, 5, 6, (4, 4), (4, 4), 2, 2, [3, 3, 3, 3], 0.8),  # up 2 / down 2
    (1, 2, 7, 6, (3, 3), (2, 2), 1, 1, [1, 1, 1, 1], None),  # critically sampled
    (1, 2, 6, 5, (1, 1), (1, 1), 1, 1, [0, 0, 0, 0], 0.5),  # bias_act's lrelu with a clamp
    (2, 1, 4, 5, (3, 5), (4, 2), 3, 2, [2, -1, -2, 3], 1.5),  # other factors, negative pads
    (1, 2, 5, 4, (2, 3), (3, 3), 2, 3, [0, 2, 1, 0], None),  # down > up
    (1, 1, 1, 1, (5, 4), (2, 2), 4, 1, [2, 2, 1, 3], None),  # one pixel
]


def _args(i, shape, dtype=torch.float64, input_seed=None):
    n, c, h, w, fu, fd, up, down, pad, clamp = shape
    return args_of(
        make_input(n, c, h, w, seed=i if input_seed is None else input_seed, dtype=dtype),
        make_filter(*fu, seed=i),
        make_filter(*fd, seed=i + 10),
        make_bias(c, seed=i, dtype=dtype),
        up,
        down,
        pad,
        SQRT2,
        0.2,
        clamp,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(dtype):
    for i, shape in enumerate(SHAPES):
        args = _args(i, shape, dtype)
        x, fu, fd, bias, up, down, pad, gain, slope, clamp = args
        out = op(*args)
        exp = filtered_lrelu_ref(x.double(), fu.double(), fd.double(), bias.double(), up, down, pad, gain, slope, clamp)
        assert out.dtype == dtype and out.shape == exp.shape, i
        tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else TOL[dtype]
        torch.testing.assert_close(out.double(), exp, **tol)


def test_matches_reference_without_bias_and_other_gains():
    x = make_input(2, 4, 9, 8, seed=3, dtype=torch.float64)
    fu, fd = make_filter(6, 6, seed=3, dtype=torch.float64), make_filter(6, 6, seed=4, dtype=torch.float64)
    for gain, slope, clamp in [(1.0, 0.0, None), (3.0, 0.5, 2.0), (0.5, 1.0, 0.0), (2.0, 0.2, float("inf"))]:
        out = op(x, fu, fd, None, 2, 2, [5, 4, 5, 4], gain, slope, clamp)
        exp = filtered_lrelu_ref(x, fu, fd, None, 2, 2, [5, 4, 5, 4], gain, slope, clamp)
        torch.testing.assert_close(out, exp, rtol=1e-12, atol=1e-12)


def _separable(fh, fw, seed, dtype=torch.float64, gain=1.0):
    """A filter that is the outer product of two 1-D low-pass-like filters, computed in dtype."""
    g = torch.Generator().manual_seed(3000 + seed)
    col, row = (torch.rand(n, generator=g, dtype=torch.float64) + 0.2 for n in (fh, fw))
    return torch.outer((col / col.sum()).to(dtype), (row / row.sum()).to(dtype)) * gain


def _check_cpu_paths():
    """The CPU kernel's paths against the float64 reference on every geometry of SHAPES: a
    filter that is an outer product (to within rounding) runs as two 1-D passes, any other as
    a 2-D sum. float64 (output and both gradients): separable filters, then the down filter a
    tap off rank 1, then both random; float32 and bfloat16: outer products rounded in float32,
    times up ** 2 (StyleGAN3's 1-D filters)."""
    for i, (n, c, h, w, fu_size, fd_size, up, down, pad, clamp) in enumerate(SHAPES):
        x = make_input(n, c, h, w, seed=i, dtype=torch.float64).requires_grad_(True)
        bias = make_bias(c, seed=i, dtype=torch.float64).requires_grad_(True)
        fu, fd = _separable(*fu_size, i), _separable(*fd_size, i + 10)
        off = fd.clone()
        off[fd_size[0] // 2, fd_size[1] // 2] *= 1 + 1e-9
        random = (make_filter(*fu_size, seed=i, dtype=torch.float64), make_filter(*fd_size, seed=i + 10))
        for filters in ((fu, fd), (fu, off), random):
            rest = (*filters, bias, up, down, pad, SQRT2, 0.2, clamp)
            out, exp = op(x, *rest), filtered_lrelu_ref(x, *rest)
            torch.testing.assert_close(out, exp, rtol=1e-12, atol=1e-12)
            go = torch.randn_like(out)
            for g, e in zip(torch.autograd.grad(out, [x, bias], go), torch.autograd.grad(exp, [x, bias], go)):
                torch.testing.assert_close(g, e, rtol=1e-12, atol=1e-12)
        fu32 = _separable(*fu_size, i, torch.float32, gain=float(up * up))
        fd32 = _separable(*fd_size, i + 10, torch.float32)
        for dtype in (torch.float32, torch.bfloat16):
            xd, bd = x.detach().to(dtype), bias.detach().to(dtype)
            rest = (up, down, pad, SQRT2, 0.2, clamp)
            exp = filtered_lrelu_ref(xd.double(), fu32.double(), fd32.double(), bd.double(), *rest)
            torch.testing.assert_close(op(xd, fu32, fd32, bd, *rest).double(), exp, **TOL[dtype])


def test_cpu_paths_match_reference():
    _check_cpu_paths()


def test_baseline_cpu_loops_match_reference():
    # The CPU loops exist for the baseline ISA and for AVX2 + FMA: the baseline ones here.
    run_with_default_cpu_capability("test_filtered_lrelu", "_check_cpu_paths")


def _row(values):
    return torch.tensor(values, dtype=torch.float64).reshape(1, 1, 1, -1)


def test_known_vectors():
    one = torch.ones(1, 1, dtype=torch.float64)
    # 1 x 1 filters: bias, leaky ReLU times gain, clamp
    x = _row([-1.0, 2.0, 0.0, -30.0])
    b = torch.tensor([0.5], dtype=torch.float64)
    assert op(x, one, one, b, gain=2.0, slope=0.1).flatten().tolist() == [-0.1, 5.0, 1.0, pytest.approx(-5.9)]
    assert op(x, one, one, b, gain=2.0, slope=0.1, clamp=4.0).flatten().tolist() == [-0.1, 4.0, 1.0, -4.0]
    # up 2 along x with the hold filter [[1, 1]], pad x (1, 0): [a, b] -> [a, a, b, b]; then the
    # pair sums [[1, 1]], down 2: [2 f(a), 2 f(b)] (f: lrelu times gain)
    hold = torch.ones(1, 2, dtype=torch.float64)
    out = op(_row([3.0, -2.0]), hold, hold, None, 2, 2, [1, 0, 0, -1], 1.0, 0.5)
    assert out.shape == (1, 1, 1, 2) and out.flatten().tolist() == [6.0, -2.0]
    # the up filter is flipped (a convolution): [a, b, c] with [[1, 2]] -> [2a + b, 2b + c]
    out = op(_row([1.0, 10.0, 100.0]), torch.tensor([[1.0, 2.0]], dtype=torch.float64), one, gain=1.0)
    assert out.flatten().tolist() == [12.0, 120.0]


def test_output_size_is_mmcvs():
    for h, up, down, pad0, pad1, fu, fd in [
        (5, 2, 2, 3, 3, 4, 4),
        (8, 1, 2, 1, 1, 4, 4),
        (7, 3, 2, -2, 3, 2, 3),
        (16, 2, 2, 10, 10, 12, 12),
        (1, 1, 5, 0, 4, 1, 1),
    ]:
        out = op(torch.zeros(1, 1, h, 2), torch.ones(fu, 1), torch.ones(fd, 1), None, up, down, [0, 0, pad0, pad1])
        # mmcv's _filtered_lrelu_ref: (H * up + pad0 + pad1 - (fu - 1) - (fd - 1) + (down - 1)) // down
        assert out.shape[2] == (h * up + pad0 + pad1 - (fu - 1) - (fd - 1) + (down - 1)) // down


def test_mask_records_the_pointwise_step():
    x, fu, fd, bias, up, down, pad, gain, slope, _ = _args(0, SHAPES[0])
    clamp = 0.3
    out, mask = forward_op(x, fu, fd, bias, up, down, pad, gain, slope, clamp)
    torch.testing.assert_close(out, op(x, fu, fd, bias, up, down, pad, gain, slope, clamp), rtol=0, atol=0)
    # the intermediate before the pointwise step: the reference with a 1 x 1 down filter, no lrelu
    one = torch.ones(1, 1, dtype=torch.float64)
    t = filtered_lrelu_ref(x, fu, one, bias, up, 1, pad, 1.0, 1.0, None)
    assert mask.dtype == torch.uint8 and mask.shape == t.shape
    expected = torch.where(t < 0, 1, 0).to(torch.uint8)
    expected[(torch.where(t < 0, t * slope, t) * gain).abs() > clamp] = 2
    assert torch.equal(mask, expected)
    assert set(mask.unique().tolist()) == {0, 1, 2}


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("index", [0, 1, 3], ids=["up2_down2_clamp", "critical", "factors"])
def test_gradcheck_and_gradgradcheck(index):
    n, c, h, w, fu, fd, up, down, pad, clamp = SHAPES[index]
    args = _args(7 + index, (1, 2, min(h, 4), min(w, 4), fu, fd, up, down, pad, clamp))
    x = args[0].clone().requires_grad_(True)
    bias = args[3].clone().requires_grad_(True)

    def fn(t, b):
        return op(t, args[1], args[2], b, *args[4:])

    assert torch.autograd.gradcheck(fn, (x, bias))
    assert torch.autograd.gradgradcheck(fn, (x, bias))


def test_gradient_matches_reference():
    for i, shape in enumerate(SHAPES):
        x, fu, fd, bias, up, down, pad, gain, slope, clamp = _args(i, shape)
        leaves = [x.requires_grad_(True), bias.requires_grad_(True)]
        out = op(x, fu, fd, bias, up, down, pad, gain, slope, clamp)
        go = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(i))
        grads = torch.autograd.grad(out, leaves, go)
        xr, br = x.detach().requires_grad_(True), bias.detach().requires_grad_(True)
        exp = torch.autograd.grad(filtered_lrelu_ref(xr, fu, fd, br, up, down, pad, gain, slope, clamp), [xr, br], go)
        for g, e in zip(grads, exp):
            torch.testing.assert_close(g, e, rtol=1e-12, atol=1e-12)


def test_r1_penalty_second_order():
    # StyleGAN's R1: the gradient of |d out / d x|^2 w.r.t. the weights before the op
    x, fu, fd, bias, up, down, pad, gain, slope, clamp = _args(8, SHAPES[0])
    w = torch.randn(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(8)).requires_grad_(True)
    bias.requires_grad_(True)

    def penalty(fn):
        xg = x.detach().requires_grad_(True)
        out = fn(xg * w)
        (gx,) = torch.autograd.grad((out**2).sum(), xg, create_graph=True)
        return torch.autograd.grad(gx.pow(2).sum(), [w, bias])

    ours = penalty(lambda t: op(t, fu, fd, bias, up, down, pad, gain, slope, clamp))
    theirs = penalty(lambda t: filtered_lrelu_ref(t, fu, fd, bias, up, down, pad, gain, slope, clamp))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_third_order_through_the_incoming_gradient():
    x, fu, fd, bias, up, down, pad, gain, slope, clamp = _args(9, SHAPES[3])
    x.requires_grad_(True)

    def grads(fn):
        g1 = torch.autograd.grad(fn(x).pow(3).sum(), x, create_graph=True)[0]
        g2 = torch.autograd.grad(g1.pow(2).sum(), x, create_graph=True)[0]
        return torch.autograd.grad(g2.sum(), x)[0]

    ours = grads(lambda t: op(t, fu, fd, bias, up, down, pad, gain, slope, clamp))
    theirs = grads(lambda t: filtered_lrelu_ref(t, fu, fd, bias, up, down, pad, gain, slope, clamp))
    torch.testing.assert_close(ours, theirs, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("index", range(len(SHAPES)))
def test_backward_op_and_its_transpose_are_adjoint(index):
    x, fu, fd, bias, up, down, pad, gain, slope, clamp = _args(index, SHAPES[index])
    out, mask = forward_op(x, fu, fd, bias, up, down, pad, gain, slope, clamp)
    g = torch.Generator().manual_seed(index)
    go = torch.randn(out.shape, generator=g, dtype=torch.float64)
    gx = torch.randn(x.shape, generator=g, dtype=torch.float64)
    size = list(x.shape[2:])
    b = backward_op(go, mask, fu, fd, up, down, pad, gain, slope, size, False)
    bt = backward_op(gx, mask, fu, fd, up, down, pad, gain, slope, size, True)
    assert b.shape == x.shape and bt.shape == out.shape
    torch.testing.assert_close((b * gx).sum(), (go * bt).sum(), rtol=1e-12, atol=1e-12)


def test_filters_that_require_grad_are_refused():
    x = make_input(1, 1, 3, 3)
    f = torch.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="mmops::filtered_lrelu: filter_up gets no gradient"):
        op(x, f, torch.ones(1, 1))
    with pytest.raises(RuntimeError, match="mmops::filtered_lrelu: filter_down gets no gradient"):
        op(x, torch.ones(1, 1), f)
    with torch.no_grad():
        assert op(x, f, torch.ones(1, 1)).shape == (1, 1, 2, 2)


def test_backward_op_checks_its_arguments():
    x, fu, fd, bias, up, down, pad, gain, slope, clamp = _args(0, SHAPES[1])
    out, mask = forward_op(x, fu, fd, bias, up, down, pad, gain, slope, clamp)
    size = list(x.shape[2:])
    with pytest.raises(RuntimeError, match="mmops::filtered_lrelu: expected grad of shape"):
        backward_op(x, mask, fu, fd, up, down, pad, gain, slope, size, False)
    with pytest.raises(RuntimeError, match="mmops::filtered_lrelu: expected mask of shape"):
        backward_op(out, mask[:, :, 1:], fu, fd, up, down, pad, gain, slope, size, False)
    with pytest.raises(RuntimeError, match="mmops::filtered_lrelu: expected mask to be a 4-D uint8"):
        backward_op(out, mask.float(), fu, fd, up, down, pad, gain, slope, size, False)
    with pytest.raises(RuntimeError, match="mmops::filtered_lrelu: expected input_size to hold 2"):
        backward_op(out, mask, fu, fd, up, down, pad, gain, slope, [3], False)


# --------------------------------------------------------------------------- wrapper and module


def test_wrapper_follows_mmcv_conventions():
    x = make_input(2, 3, 6, 7, seed=10, dtype=torch.float64)
    bias = make_bias(3, seed=10, dtype=torch.float64)
    taps = torch.tensor([1.0, 3.0, 3.0, 1.0], dtype=torch.float64) / 8
    f2 = make_filter(3, 4, seed=10, dtype=torch.float64)
    calls = [
        dict(),  # identity filters: bias_act's lrelu
        dict(filter_up=taps, filter_down=taps, up=2, down=2, padding=3, clamp=0.5),
        dict(filter_up=f2, filter_down=taps, up=2, down=1, padding=(2, 1), flip_filter=True),
        dict(filter_up=None, filter_down=f2, up=3, down=2, padding=[1, 2, 0, 3], gain=1.0, slope=0.0),
        dict(filter_up=taps, up=2, padding=[2, 1, 2, 1], flip_filter=True, clamp=1),
    ]
    for kwargs in calls:
        out = mmops.filtered_lrelu(x, bias=bias, **kwargs)
        torch.testing.assert_close(out, filtered_lrelu_mmcv_ref(x, bias=bias, **kwargs), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="padding"):
        mmops.filtered_lrelu(x, padding=[1, 2, 3])


def test_module_and_scripting():
    taps = torch.tensor([1.0, 3.0, 3.0, 1.0]) / 8
    module = mmops.FilteredLReLU(taps, taps, up=2, down=2, padding=3, clamp=256)
    assert repr(module) == (
        "FilteredLReLU(filter_up=[4, 4], filter_down=[4, 4], up=2, down=2, padding=[3, 3, 3, 3], "
        "gain=1.4142135623730951, slope=0.2, clamp=256.0)"
    )
    x = make_input(1, 2, 5, 5, seed=12)
    b = make_bias(2, seed=12)
    torch.testing.assert_close(module(x, b), mmops.filtered_lrelu(x, taps, taps, b, 2, 2, 3, clamp=256), rtol=0, atol=0)
    scripted = torch.jit.script(module)
    torch.testing.assert_close(scripted(x, b), module(x, b), rtol=0, atol=0)
    torch.testing.assert_close(
        torch.jit.script(mmops.filtered_lrelu)(x, taps, None, b, 2),
        mmops.filtered_lrelu(x, taps, None, b, 2),
        rtol=0,
        atol=0,
    )


def test_strided_and_channels_last_inputs():
    args = _args(13, SHAPES[0], torch.float32)
    exp = op(*args)
    x = args[0]
    wide = torch.randn(2, 6, 5, 12)[:, ::2, :, ::2]
    wide.copy_(x)
    assert not wide.is_contiguous()
    torch.testing.assert_close(op(wide, *args[1:]), exp, rtol=0, atol=0)
    torch.testing.assert_close(op(x.contiguous(memory_format=torch.channels_last), *args[1:]), exp, rtol=0, atol=0)
    fu_strided = torch.randn(4, 8, dtype=args[1].dtype)[:, ::2].copy_(args[1])
    torch.testing.assert_close(op(x, fu_strided, *args[2:]), exp, rtol=0, atol=0)


def test_cpu_results_do_not_depend_on_the_thread_count():
    args = _args(14, (2, 16, 12, 13, (4, 4), (4, 4), 2, 2, [3, 3, 3, 3], 0.8), torch.float32)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = op(*args)
        torch.set_num_threads(max(2, threads))
        b = op(*args)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(a, b)


def test_autocast_runs_in_float32():
    x, fu, fd, bias, *rest = _args(15, SHAPES[0], torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x.bfloat16(), fu, fd, bias, *rest)
    assert out.dtype == torch.bfloat16
    exp = op(x.bfloat16().float(), fu, fd, bias, *rest).bfloat16()
    torch.testing.assert_close(out, exp, rtol=0, atol=0)


def test_nan_stays_local():
    x = torch.zeros(1, 1, 8, 8, dtype=torch.float64)
    x[0, 0, 3, 4] = float("nan")
    out = op(x, torch.ones(2, 2, dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64), clamp=1.0)
    nan = torch.isnan(out[0, 0])
    # the intermediate samples (2..3, 3..4) read it; the outputs (1..3, 2..4) read those
    assert nan.sum() == 9 and nan[1:4, 2:5].all()


def test_huge_sizes_give_our_error():
    meta = dict(device="meta")
    with pytest.raises(RuntimeError, match="mmops::filtered_lrelu: .*at most 2\\^31 - 1 on each side"):
        op(torch.empty(1, 1, 2**30, 4, **meta), torch.empty(1, 1, **meta), torch.empty(1, 1, **meta), None, 4)
    with pytest.raises(RuntimeError, match="mmops::filtered_lrelu: .*H and W to be at most"):
        op(torch.empty(1, 1, 2**31, 1, **meta), torch.empty(1, 1, **meta), torch.empty(1, 1, **meta))


# --------------------------------------------------------------------------- CUDA tile emulation


def _axes(up, down, pad0, fu, fd, n_in, mid, n_out, backward):
    """filtered_lrelu_math.h's PassAxis of the forward or of the gradient of input."""
    if not backward:
        return dict(n_in=n_in, up=up, off1=-pad0, k1=fu, mid=mid, down=down, off2=0, k2=fd, out=n_out)
    return dict(n_in=n_out, up=down, off1=1 - fd, k1=fd, mid=mid, down=up, off2=pad0 + 1 - fu, k2=fu, out=n_in)


def _emulate_fused(z, k1, k2, ax, ay, tile, mask, record, gain, slope, clamp):
    """fused_pass_kernel's index arithmetic on one plane z (float64): the tile sizes of
    tile_axis, the input and intermediate tiles, the local tap indices (their bounds asserted:
    an out-of-bounds read would be a bug on the GPU), the mask bytes each tile owns (each
    written exactly once)."""

    def sizes(a):
        mid_tile = tile * a["down"] + a["k2"] - 1
        return mid_tile, (mid_tile + a["k1"] - 2) // a["up"] + 2

    (mty, ity), (mtx, itx) = sizes(ay), sizes(ax)
    tiles_y, tiles_x = -(-ay["out"] // tile), -(-ax["out"] // tile)
    out = torch.full((ay["out"], ax["out"]), float("nan"), dtype=torch.float64)
    writes = torch.zeros(ay["mid"], ax["mid"], dtype=torch.int64)
    for by in range(tiles_y):
        for bx in range(tiles_x):
            oy0, ox0 = by * tile, bx * tile
            my0, mx0 = oy0 * ay["down"] + ay["off2"], ox0 * ax["down"] + ax["off2"]
            iy0, ix0 = (my0 + ay["off1"]) // ay["up"], (mx0 + ax["off1"]) // ax["up"]
            s_in = torch.zeros(ity, itx, dtype=torch.float64)
            for ly in range(ity):
                for lx in range(itx):
                    if 0 <= iy0 + ly < ay["n_in"] and 0 <= ix0 + lx < ax["n_in"]:
                        s_in[ly, lx] = z[iy0 + ly, ix0 + lx]
            s_mid = torch.zeros(mty, mtx, dtype=torch.float64)
            for ly in range(mty):
                for lx in range(mtx):
                    my, mx = my0 + ly, mx0 + lx
                    if not (0 <= my < ay["mid"] and 0 <= mx < ax["mid"]):
                        continue
                    py, px = my + ay["off1"], mx + ax["off1"]
                    ky0, kx0 = (-py) % ay["up"], (-px) % ax["up"]
                    acc = 0.0
                    for jy, ky in enumerate(range(ky0, ay["k1"], ay["up"])):
                        sy = (py + ky0) // ay["up"] - iy0 + jy
                        for jx, kx in enumerate(range(kx0, ax["k1"], ax["up"])):
                            sx = (px + kx0) // ax["up"] - ix0 + jx
                            assert 0 <= sy < ity and 0 <= sx < itx
                            acc += s_in[sy, sx].item() * k1[ay["k1"] - 1 - ky, ax["k1"] - 1 - kx].item()
                    if record:
                        code = 1 if acc < 0 else 0
                        acc = (acc * slope if acc < 0 else acc) * gain
                        if clamp is not None and abs(acc) > clamp:
                            acc, code = math.copysign(clamp, acc), 2
                        own_y = ly < tile * ay["down"] or by == tiles_y - 1
                        own_x = lx < tile * ax["down"] or bx == tiles_x - 1
                        if own_y and own_x:
                            mask[my, mx] = code
                            writes[my, mx] += 1
                    else:
                        acc *= [gain, gain * slope, 0.0][int(mask[my, mx])]
                    s_mid[ly, lx] = acc
            for ty in range(min(tile, ay["out"] - oy0)):
                for tx in range(min(tile, ax["out"] - ox0)):
                    acc = 0.0
                    for ky in range(ay["k2"]):
                        for kx in range(ax["k2"]):
                            ly, lx = ty * ay["down"] + ky, tx * ax["down"] + kx
                            assert ly < mty and lx < mtx
                            acc += s_mid[ly, lx].item() * k2[ay["k2"] - 1 - ky, ax["k2"] - 1 - kx].item()
                    out[oy0 + ty, ox0 + tx] = acc
    if record:
        assert torch.equal(writes, torch.ones_like(writes)), "every mask byte written by exactly one tile"
    return out


@pytest.mark.parametrize("index", [0, 3, 4])
@pytest.mark.parametrize("tile", [2, 3])
def test_cuda_tile_indexing_emulation(index, tile):
    x, fu, fd, bias, up, down, pad, gain, slope, clamp = _args(30 + index, SHAPES[index])
    x, bias = x[:1, :1], bias[:1]
    out, mask = forward_op(x, fu, fd, bias, up, down, pad, gain, slope, clamp)
    (h, w), (mh, mw), (oh, ow) = x.shape[2:], mask.shape[2:], out.shape[2:]
    ax = _axes(up, down, pad[0], fu.shape[1], fd.shape[1], w, mw, ow, False)
    ay = _axes(up, down, pad[2], fu.shape[0], fd.shape[0], h, mh, oh, False)
    emulated_mask = torch.full((mh, mw), 9, dtype=torch.uint8)
    got = _emulate_fused(x[0, 0] + bias[0], fu, fd, ax, ay, tile, emulated_mask, True, gain, slope, clamp)
    torch.testing.assert_close(got, out[0, 0], rtol=1e-12, atol=1e-12)
    assert torch.equal(emulated_mask, mask[0, 0])
    # the gradient of input: the filters swapped and flipped, the mask applied
    go = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(index))
    exp = backward_op(go, mask, fu, fd, up, down, pad, gain, slope, [h, w], False)
    bx = _axes(up, down, pad[0], fu.shape[1], fd.shape[1], w, mw, ow, True)
    by = _axes(up, down, pad[2], fu.shape[0], fd.shape[0], h, mh, oh, True)
    got = _emulate_fused(go[0, 0], fd.flip([0, 1]), fu.flip([0, 1]), bx, by, tile, mask[0, 0], False, gain, slope, None)
    torch.testing.assert_close(got, exp[0, 0], rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu(dtype):
    shapes = [s for s in CUDA_SHAPES] + SHAPES
    for i, (n, c, h, w, fu_s, fd_s, up, down, pad, clamp) in enumerate(shapes):
        x = make_input(n, c, h, w, seed=20 + i, dtype=dtype)
        fu, fd, bias = make_filter(*fu_s, seed=i), make_filter(*fd_s, seed=i + 10), make_bias(c, seed=i, dtype=dtype)
        args = (up, down, pad, SQRT2, 0.2, clamp)
        out, mask = forward_op(x, fu, fd, bias, *args)
        out_c, mask_c = forward_op(x.cuda(), fu.cuda(), fd.cuda(), bias.cuda(), *args)
        tol = TOL[dtype] if dtype != torch.float64 else dict(rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(out_c.cpu(), out, **tol)
        torch.testing.assert_close(op(x.cuda(), fu.cuda(), fd.cuda(), bias.cuda(), *args).cpu(), out, **tol)
        if dtype in (torch.float32, torch.float64):  # 16-bit: a sample may round to the other side of 0
            assert torch.equal(mask_c.cpu(), mask), i
        size = [h, w]
        common = (fu, fd, up, down, pad, SQRT2, 0.2, size)
        common_c = (fu.cuda(), fd.cuda(), up, down, pad, SQRT2, 0.2, size)
        go = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(i)).to(dtype)
        gx = torch.randn(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(i)).to(dtype)
        for grad, transpose in ((go, False), (gx, True)):
            exp = backward_op(grad, mask, *common, transpose)
            got = backward_op(grad.cuda(), mask.cuda(), *common_c, transpose).cpu()
            torch.testing.assert_close(got, exp, **magnitude_tolerance(dtype, "grad", exp.double()))


@pytest.mark.cuda
def test_cuda_stylegan3_shapes_and_second_order():
    taps = torch.tensor([0.0, -0.02, 0.0, 0.11, 0.0, -0.29, 0.0, 1.2, 0.0, -0.29, 0.0, 0.11], device="cuda")
    taps = taps / taps.sum()
    for up, down, pad in [(2, 2, [10, 10, 10, 10]), (1, 1, [5, 6, 5, 6])]:
        x = torch.randn(2, 16, 24, 24, device="cuda", requires_grad=True)
        bias = torch.randn(16, device="cuda", requires_grad=True)
        out = mmops.filtered_lrelu(x, taps, taps, bias, up, down, pad, clamp=256)
        exp = filtered_lrelu_mmcv_ref(
            x.detach().cpu(), taps.cpu(), taps.cpu(), bias.detach().cpu(), up, down, pad, clamp=256
        )
        torch.testing.assert_close(out.double().cpu(), exp, rtol=1e-5, atol=1e-5)
        (g,) = torch.autograd.grad(out.square().sum(), x, create_graph=True)
        gg = torch.autograd.grad(g.square().sum(), [x, bias])
        xd = x.detach().double().cpu().requires_grad_(True)
        bd = bias.detach().double().cpu().requires_grad_(True)
        (h,) = torch.autograd.grad(
            filtered_lrelu_mmcv_ref(xd, taps.cpu(), taps.cpu(), bd, up, down, pad, clamp=256).square().sum(),
            xd,
            create_graph=True,
        )
        hh = torch.autograd.grad(h.square().sum(), [xd, bd], allow_unused=True, materialize_grads=True)
        for a, b in zip(gg, hh):  # float32 sums of many terms: atol relative to the largest value
            torch.testing.assert_close(a.double().cpu(), b, rtol=1e-4, atol=1e-4 * b.abs().max().item())
    xs = torch.randn(1, 2, 4, 4, dtype=torch.float64, device="cuda", requires_grad=True)
    bs = torch.randn(2, dtype=torch.float64, device="cuda", requires_grad=True)
    fu = make_filter(4, 4, dtype=torch.float64).cuda()

    def fn(t, b):
        return op(t, fu, fu, b, 2, 2, [3, 3, 3, 3], SQRT2, 0.2, 0.8)

    assert torch.autograd.gradcheck(fn, (xs, bs))
    assert torch.autograd.gradgradcheck(fn, (xs, bs))


@pytest.mark.cuda
def test_cuda_many_planes_and_empty():
    # more planes than the grid's z limit (the planes loop) and empty inputs
    x = torch.randn(70000, 1, 3, 3, device="cuda")
    f = make_filter(4, 4).cuda()
    args = (f, f, None, 2, 2, [3, 3, 3, 3])
    torch.testing.assert_close(op(x, *args).cpu(), op(x.cpu(), f.cpu(), f.cpu(), None, 2, 2, [3, 3, 3, 3]))
    e = torch.randn(0, 3, 4, 4, device="cuda", requires_grad=True)
    out = op(e, *args)
    assert out.shape == (0, 3, 4, 4)
    out.sum().backward()
    assert e.grad.shape == e.shape


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.filtered_lrelu")
    x = make_input(2, 3, 6, 7, seed=16, dtype=torch.float64)
    bias = make_bias(3, seed=16, dtype=torch.float64)
    taps = torch.tensor([1.0, 3.0, 3.0, 1.0], dtype=torch.float64) / 8
    f2 = torch.outer(taps, taps)
    for kwargs in [
        dict(filter_up=taps, filter_down=taps, up=2, down=2, padding=3, clamp=0.5),
        dict(filter_up=f2, filter_down=None, up=2, padding=[2, 1, 2, 1], flip_filter=True),
        dict(filter_up=None, filter_down=f2, down=2, padding=(1, 2), gain=1.0, slope=0.1),
    ]:
        ours = ops.filtered_lrelu(x, bias=bias, **kwargs)
        # mmcv's reference path (its upfirdn2d and bias_act: routed to mmops's own ops)
        theirs = module._filtered_lrelu_ref(x, bias=bias, **kwargs)
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(ours, filtered_lrelu_mmcv_ref(x, bias=bias, **kwargs), rtol=1e-12, atol=1e-12)
    # second order through the bridge
    xg = x.clone().requires_grad_(True)
    out = ops.filtered_lrelu(xg, taps, taps, bias, 2, 2, 3)
    (g,) = torch.autograd.grad(out.square().sum(), xg, create_graph=True)
    assert g.requires_grad
