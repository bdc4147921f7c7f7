"""Tests of mmops::correlation: the conformance cases, then the float64 loop reference
(correlation_reference.py) for every option, mmcv's known vectors, gradcheck, the output
size rule, NaN, strides, CUDA == CPU and the mmcv bridge."""

import importlib
import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL
from correlation_reference import correlation_composite, correlation_ref, out_side

import mmops

op = torch.ops.mmops.correlation
bwd_op = torch.ops.mmops._correlation_backward
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# (kernel_size, max_displacement, stride, padding, dilation, dilation_patch)
OPTIONS = [
    ((1, 1), 1, (1, 1), (0, 0), (1, 1), (1, 1)),
    ((1, 1), 2, (1, 1), (0, 0), (1, 1), (2, 2)),  # FlowNetC-like: dilated displacements
    ((3, 3), 1, (1, 1), (1, 1), (1, 1), (1, 1)),
    ((3, 2), 1, (2, 1), (1, 0), (2, 1), (1, 2)),  # every option, h and w apart
    ((1, 1), 0, (2, 2), (1, 1), (1, 1), (1, 1)),  # one displacement, strided
]


def make_inputs(n, c, h, w, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x1 = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    x2 = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    return x1.to(dtype), x2.to(dtype)


def as_args(options):
    k, md, s, p, d, dp = options
    return (list(k), md, list(s), list(p), list(d), list(dp))


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    n, c, h, w = (2, 3, 7, 9) if size == 0 else (3, 5, 8, 11)
    x1, x2 = make_inputs(n, c, h, w, seed=30 + size, dtype=dtype)
    return Sample((x1.to(device), x2.to(device), [3, 3], 2, [1, 1], [1, 1], [1, 1], [1, 1]))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    opts = ([1, 1], 1, [1, 1], [0, 0], [1, 1], [1, 1])
    return [
        Sample((torch.randn(0, 3, 5, 6, **f), torch.randn(0, 3, 5, 6, **f), *opts), out_shapes=[(0, 3, 3, 5, 6)]),
        Sample((torch.randn(2, 0, 5, 6, **f), torch.randn(2, 0, 5, 6, **f), *opts), out_shapes=[(2, 3, 3, 5, 6)]),
        Sample((torch.randn(2, 3, 0, 6, **f), torch.randn(2, 3, 0, 6, **f), *opts), out_shapes=[(2, 3, 3, 0, 6)]),
    ]


CUDA_SHAPES = [  # (n, c, h, w, options)
    (2, 3, 7, 9, OPTIONS[0]),
    (1, 8, 12, 40, OPTIONS[1]),  # more displacements than a thread's 8
    (2, 5, 9, 10, OPTIONS[2]),
    (1, 6, 11, 13, OPTIONS[3]),
    (2, 7, 10, 10, OPTIONS[4]),
    (1, 32, 16, 24, ((1, 1), 4, (1, 1), (0, 0), (1, 1), (1, 1))),  # PWC-Net: 81 displacements
]


def _cuda_samples(dtype):
    for i, (n, c, h, w, options) in enumerate(CUDA_SHAPES):
        x1, x2 = make_inputs(n, c, h, w, seed=40 + i, dtype=dtype)
        yield Sample((x1, x2, *as_args(options)))


def _cuda_tol(dtype, what, expected, sample):
    return dict(rtol=0, atol=0)  # the same arithmetic in the same order on both devices


class _Net(torch.nn.Module):
    """correlation in a model: Correlation, the functional wrapper and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.corr = mmops.Correlation(kernel_size=3, max_displacement=2, padding=1)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor):
        a = self.corr(x1 * 2.0, x2)
        b = mmops.correlation(x1.sin(), x2, 1, 1, 2, 0, 1, 2)
        return a.sum(dim=(1, 2)), b + 1.0, torch.ops.mmops.correlation(x1, x2)


def _helpers(sample):
    x1, x2, *opts = sample.args
    out = op(*sample.args)
    return [(bwd_op, (torch.randn_like(out), x1, x2, *opts))]


def _message(text):
    return f"mmops::correlation: .*{text}"


def _opts(args, position, value):
    args = list(args)
    args[position] = value
    return tuple(args)


CONFORMANCE = [
    ConformanceCase(
        "correlation",
        op,
        _sample,
        grad_args=(0, 1),
        feature_args=(0, 1),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cuda_tol=_cuda_tol,
        nonzero_grads=True,
        bad_inputs={
            "input1_3d": BadInput(lambda a, b, *o: (a[0], b, *o), _message("input1 to be a 4-D"), meta=True),
            "int_input": BadInput(
                lambda a, b, *o: (a.int(), b.int(), *o), _message("input1 to have a float"), meta=True
            ),
            "input2_shape": BadInput(lambda a, b, *o: (a, b[:, 1:], *o), _message("input2 of the shape"), meta=True),
            "input2_dtype": BadInput(
                lambda a, b, *o: (a, b.double(), *o), _message("input2 to have the dtype"), meta=True
            ),
            "kernel_size_0": BadInput(
                lambda *a: _opts(a, 2, [0, 1]), _message("kernel_size in \\[1, 1024\\]"), meta=True
            ),
            "kernel_size_3": BadInput(
                lambda *a: _opts(a, 2, [1, 1, 1]), _message("kernel_size to be an int or a pair"), meta=True
            ),
            "max_displacement": BadInput(
                lambda *a: _opts(a, 3, -1), _message("max_displacement in \\[0, 1024\\]"), meta=True
            ),
            "stride_0": BadInput(lambda *a: _opts(a, 4, [1, 0]), _message("stride in"), meta=True),
            "padding_negative": BadInput(lambda *a: _opts(a, 5, [-1, 0]), _message("padding in"), meta=True),
            "dilation_0": BadInput(lambda *a: _opts(a, 6, [0, 1]), _message("dilation in"), meta=True),
            "dilation_patch_huge": BadInput(
                lambda *a: _opts(a, 7, [1, 2**40]), _message("dilation_patch in"), meta=True
            ),
        },
    ),
]


class TestCorrelationConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def grads_of(fn, x1, x2, go):
    a = x1.detach().requires_grad_(True)
    b = x2.detach().requires_grad_(True)
    out = fn(a, b)
    g1, g2 = torch.autograd.grad(out, (a, b), go)
    return out, g1, g2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("options", OPTIONS, ids=[f"opt{i}" for i in range(len(OPTIONS))])
def test_matches_reference(dtype, options):
    x1, x2 = make_inputs(2, 3, 6, 7, seed=1, dtype=dtype)
    args = as_args(options)
    out = op(x1, x2, *args)
    exp = correlation_ref(x1, x2, *options)
    assert out.shape == exp.shape and out.dtype == dtype and out.is_contiguous()
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    _, g1, g2 = grads_of(lambda a, b: op(a, b, *args), x1, x2, go)
    _, e1, e2 = grads_of(lambda a, b: correlation_ref(a, b, *options), x1.double(), x2.double(), go.double())
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else TOL[dtype]
    torch.testing.assert_close(out.double(), exp, **tol)
    torch.testing.assert_close(g1.double(), e1, **tol)
    torch.testing.assert_close(g2.double(), e2, **tol)


def test_matches_composite_on_larger_inputs():
    x1, x2 = make_inputs(2, 16, 20, 24, seed=3, dtype=torch.float64)
    for options in OPTIONS + [((1, 1), 4, (1, 1), (0, 0), (1, 1), (1, 1))]:
        torch.testing.assert_close(op(x1, x2, *as_args(options)), correlation_composite(x1, x2, *options),
                                   rtol=1e-12, atol=1e-12)  # fmt: skip


@pytest.mark.parametrize(
    "h,k,s,p,d", [(5, 3, 1, 0, 1), (5, 3, 2, 1, 2), (2, 3, 1, 0, 1), (1, 5, 1, 1, 1), (7, 2, 3, 0, 3)]
)
def test_output_size(h, k, s, p, d):
    x1, x2 = make_inputs(1, 2, h, h + 1, seed=4)
    out = op(x1, x2, [k, k], 1, [s, s], [p, p], [d, d], [1, 1])
    assert out.shape == (1, 3, 3, out_side(h, k, s, p, d), out_side(h + 1, k, s, p, d))
    assert out_side(2, 3, 1, 0, 1) == 0  # a map smaller than the dilated kernel: an empty output
    meta = op(x1.to("meta"), x2.to("meta"), [k, k], 1, [s, s], [p, p], [d, d], [1, 1])
    assert meta.shape == out.shape


# mmcv's tests/test_ops/test_correlation.py: Correlation(max_displacement=0) on 3 x 3 maps
MMCV_INPUT1 = [[[[1.0, 2.0, 3.0], [0.0, 1.0, 2.0], [3.0, 5.0, 2.0]]]]
MMCV_INPUT2 = [[[[1.0, 2.0, 3.0], [3.0, 1.0, 2.0], [8.0, 5.0, 2.0]]]]
MMCV_OUTPUT = [[[[[1.0, 4.0, 9.0], [0.0, 1.0, 4.0], [24.0, 25.0, 4.0]]]]]


def _check_mmcv_vectors(layer, device, dtype):
    x1 = torch.tensor(MMCV_INPUT1, dtype=dtype, device=device, requires_grad=True)
    x2 = torch.tensor(MMCV_INPUT2, dtype=dtype, device=device, requires_grad=True)
    out = layer(x1, x2)
    out.backward(torch.ones_like(out))
    assert out.shape == (1, 1, 1, 3, 3)
    assert torch.equal(out.detach().cpu(), torch.tensor(MMCV_OUTPUT, dtype=dtype))
    assert torch.equal(x1.grad, x2.detach()) and torch.equal(x2.grad, x1.detach())


@pytest.mark.parametrize("dtype", DTYPES)
def test_mmcv_known_vectors(dtype):
    _check_mmcv_vectors(mmops.Correlation(max_displacement=0), "cpu", dtype)
    _check_mmcv_vectors(lambda a, b: mmops.correlation(a, b, max_displacement=0), "cpu", dtype)


def test_gradcheck():
    for i, options in enumerate(OPTIONS):
        x1, x2 = make_inputs(1, 2, 5, 6, seed=10 + i, dtype=torch.float64)
        x1.requires_grad_(True)
        x2.requires_grad_(True)
        assert torch.autograd.gradcheck(lambda a, b: op(a, b, *as_args(options)), (x1, x2))


# --------------------------------------------------------------------------- rules


def test_displacement_order_and_sign():
    # input2 = input1 moved by (+1 row, +2 columns): the match sits at dy = +1, dx = +2
    x1 = torch.zeros(1, 1, 6, 8, dtype=torch.float64)
    x1[0, 0, 2, 3] = 1.0
    x2 = torch.zeros_like(x1)
    x2[0, 0, 3, 5] = 1.0
    out = op(x1, x2, [1, 1], 2, [1, 1], [0, 0], [1, 1], [1, 1])
    hits = (out[0] != 0).nonzero().tolist()
    assert hits == [[2 + 1, 2 + 2, 2, 3]]  # [ph, pw, oh, ow]: (ph, pw) - 2 = (dy, dx)


def test_nan_propagates_only_to_the_terms_that_read_it():
    x1, x2 = make_inputs(1, 2, 5, 5, seed=5, dtype=torch.float64)
    x2[0, 1, 2, 2] = math.nan
    out = op(x1, x2, [1, 1], 1, [1, 1], [0, 0], [1, 1], [1, 1])
    # output (ph, pw, oh, ow) reads x2 at (oh + ph - 1, ow + pw - 1)
    reads = torch.zeros(3, 3, 5, 5, dtype=torch.bool)
    for ph in range(3):
        for pw in range(3):
            oh, ow = 2 - (ph - 1), 2 - (pw - 1)
            reads[ph, pw, oh, ow] = True
    assert torch.equal(torch.isnan(out[0]), reads)


def test_strided_and_channels_last_inputs():
    x1, x2 = make_inputs(2, 4, 6, 7, seed=6)
    args = as_args(OPTIONS[3])
    exp = op(x1, x2, *args)
    cl = torch.channels_last
    torch.testing.assert_close(op(x1.contiguous(memory_format=cl), x2, *args), exp, rtol=0, atol=0)
    wide = torch.randn(2, 8, 6, 14)[:, ::2, :, ::2]
    wide.copy_(x2)
    torch.testing.assert_close(op(x1, wide, *args), exp, rtol=0, atol=0)
    go = torch.randn(exp.shape[::-1]).permute(4, 3, 2, 1, 0)
    _, a1, a2 = grads_of(lambda a, b: op(a, b, *args), x1, x2, go)
    _, b1, b2 = grads_of(lambda a, b: op(a, b, *args), x1, x2, go.contiguous())
    assert torch.equal(a1, b1) and torch.equal(a2, b2)


def test_module_and_functional():
    x1, x2 = make_inputs(1, 3, 6, 6, seed=7)
    module = mmops.Correlation(kernel_size=3, max_displacement=2, stride=1, padding=1, dilation=1, dilation_patch=2)
    assert repr(module) == (
        "Correlation(kernel_size=3, max_displacement=2, stride=1, padding=1, dilation=1, dilation_patch=2)"
    )
    torch.testing.assert_close(module(x1, x2), mmops.correlation(x1, x2, 3, 2, 1, 1, 1, 2), rtol=0, atol=0)
    torch.testing.assert_close(mmops.correlation(x1, x2, (3, 3), 2, [1, 1], 1, 1, (2, 2)), module(x1, x2))
    scripted = torch.jit.script(module)
    torch.testing.assert_close(scripted(x1, x2), module(x1, x2), rtol=0, atol=0)


def test_double_backward_refused():
    x1, x2 = make_inputs(1, 1, 3, 3, seed=11, dtype=torch.float64)
    x1.requires_grad_(True)
    out = op(x1, x2)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(out, x1, torch.randn_like(out).requires_grad_(True), create_graph=True)


def test_cpu_results_do_not_depend_on_the_thread_count():
    x1, x2 = make_inputs(2, 8, 12, 13, seed=19)
    args = as_args(OPTIONS[3])
    go = torch.randn(op(x1, x2, *args).shape, generator=torch.Generator().manual_seed(20))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        r1 = grads_of(lambda a, b: op(a, b, *args), x1, x2, go)
        torch.set_num_threads(max(2, threads))
        r2 = grads_of(lambda a, b: op(a, b, *args), x1, x2, go)
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(r1, r2))


def test_autocast_runs_in_float32():
    x1, x2 = make_inputs(1, 4, 5, 6, seed=10)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x1.bfloat16(), x2)  # mixed dtypes run in float32
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, op(x1.bfloat16().float(), x2).bfloat16(), rtol=0, atol=0)


def test_backward_helper_checks():
    x1, x2 = make_inputs(1, 2, 4, 5, seed=12)
    args = as_args(OPTIONS[0])
    go = torch.randn(op(x1, x2, *args).shape)
    with pytest.raises(RuntimeError, match="mmops::correlation: .*grad_output of shape"):
        bwd_op(go[:, :1], x1, x2, *args)
    with pytest.raises(RuntimeError, match="mmops::correlation: .*grad_output in the dtype"):
        bwd_op(go.double(), x1, x2, *args)


# --------------------------------------------------------------------------- the CUDA indexing


def _disp(index, md, dp):
    return (index - md) * dp


def _out_coord(q, i, stride, pad, dil, size):
    num = q + pad - i * dil
    if num < 0 or num % stride != 0:
        return -1
    return num // stride if num // stride < size else -1


def emulate_cuda_forward(x1, x2, options, k_pw=8):
    """correlation_cuda.cu's forward_kernel in Python: item -> (n, ph, chunk of 8 pw, oh, ow),
    ow fastest; per tap and channel one input1 value times the chunk's input2 row values."""
    (kh, kw), md, (sh, sw), (ph_, pw_), (dh, dw), (dph, dpw) = options
    n_, c_, h, w = x1.shape
    patch = 2 * md + 1
    oh_, ow_ = out_side(h, kh, sh, ph_, dh), out_side(w, kw, sw, pw_, dw)
    chunks = (patch + k_pw - 1) // k_pw
    a, b = x1.flatten().tolist(), x2.flatten().tolist()
    out = torch.full((n_, patch, patch, oh_, ow_), math.nan, dtype=torch.float64)
    for item in range(n_ * patch * chunks * oh_ * ow_):
        ow, rest = item % ow_, item // ow_
        oh, rest = rest % oh_, rest // oh_
        pw0, rest = (rest % chunks) * k_pw, rest // chunks
        ph, n = rest % patch, rest // patch
        dy = _disp(ph, md, dph)
        acc = [0.0] * k_pw
        for i in range(kh):
            y1 = oh * sh - ph_ + i * dh
            if not (0 <= y1 < h and 0 <= y1 + dy < h):
                continue
            for j in range(kw):
                x1_ = ow * sw - pw_ + j * dw
                if not 0 <= x1_ < w:
                    continue
                x2s = [x1_ + _disp(pw0 + q, md, dpw) for q in range(k_pw)]
                valid = [pw0 + q < patch and 0 <= x2s[q] < w for q in range(k_pw)]
                for c in range(c_):
                    va = a[((n * c_ + c) * h + y1) * w + x1_]
                    row = ((n * c_ + c) * h + y1 + dy) * w
                    for q in range(k_pw):
                        if valid[q]:
                            acc[q] += va * b[row + x2s[q]]
        for q in range(k_pw):
            if pw0 + q < patch:
                out[n, ph, pw0 + q, oh, ow] = acc[q]
    return out


def emulate_cuda_backward(go, x1, x2, options, second, k_c=4):
    """correlation_cuda.cu's backward_kernel in Python: item -> (n, chunk of 4 channels, y, x),
    x fastest; per displacement the gathered grad_output times the other input."""
    (kh, kw), md, (sh, sw), (ph_, pw_), (dh, dw), (dph, dpw) = options
    n_, c_, h, w = x1.shape
    patch = 2 * md + 1
    oh_, ow_ = go.shape[-2:]
    other = (x1 if second else x2).flatten().tolist()
    g = go.flatten().tolist()
    chunks = (c_ + k_c - 1) // k_c
    grad = torch.full(x1.shape, math.nan, dtype=torch.float64)
    for item in range(n_ * chunks * h * w):
        x, rest = item % w, item // w
        y, rest = rest % h, rest // h
        c0, n = (rest % chunks) * k_c, rest // chunks
        acc = [0.0] * k_c
        for ph in range(patch):
            dy = _disp(ph, md, dph)
            oy = y - dy if second else y + dy
            if not 0 <= oy < h:
                continue
            for pw in range(patch):
                dx = _disp(pw, md, dpw)
                ox = x - dx if second else x + dx
                if not 0 <= ox < w:
                    continue
                qy, qx = (oy, ox) if second else (y, x)
                base = ((n * patch + ph) * patch + pw) * oh_ * ow_
                total = 0.0
                for i in range(kh):
                    oh = _out_coord(qy, i, sh, ph_, dh, oh_)
                    if oh < 0:
                        continue
                    for j in range(kw):
                        ow = _out_coord(qx, j, sw, pw_, dw, ow_)
                        if ow >= 0:
                            total += g[base + oh * ow_ + ow]
                for v in range(k_c):
                    if c0 + v < c_:
                        acc[v] += total * other[((n * c_ + c0 + v) * h + oy) * w + ox]
        for v in range(k_c):
            if c0 + v < c_:
                grad[n, c0 + v, y, x] = acc[v]
    return grad


EMULATED = OPTIONS[1:4] + [((1, 1), 4, (1, 1), (0, 0), (1, 1), (1, 1))]  # the last: two chunks of pw


@pytest.mark.parametrize("options", EMULATED, ids=["opt1", "opt2", "opt3", "md4"])
def test_cuda_indexing_emulation(options):
    # float64 sums in the kernel's order: the CPU kernel's values exactly
    x1, x2 = make_inputs(2, 5, 6, 11, seed=21, dtype=torch.float64)
    args = as_args(options)
    out = op(x1, x2, *args)
    torch.testing.assert_close(emulate_cuda_forward(x1, x2, options), out, rtol=0, atol=0)
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(22), dtype=torch.float64)
    g1, g2 = bwd_op(go, x1, x2, *args)
    torch.testing.assert_close(emulate_cuda_backward(go, x1, x2, options, second=False), g1, rtol=0, atol=0)
    torch.testing.assert_close(emulate_cuda_backward(go, x1, x2, options, second=True), g2, rtol=0, atol=0)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_bitwise(dtype):
    for i, (n, c, h, w, options) in enumerate(
        CUDA_SHAPES + [(2, 64, 24, 32, ((1, 1), 10, (1, 1), (0, 0), (1, 1), (2, 2)))]
    ):
        x1, x2 = make_inputs(n, c, h, w, seed=50 + i, dtype=dtype)
        args = as_args(options)
        go = torch.randn(op(x1, x2, *args).shape, generator=torch.Generator().manual_seed(60 + i)).to(dtype)
        cpu = grads_of(lambda a, b: op(a, b, *args), x1, x2, go)
        gpu = grads_of(lambda a, b: op(a, b, *args), x1.cuda(), x2.cuda(), go.cuda())
        for a, b in zip(gpu, cpu):
            torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_mmcv_known_vectors(dtype):
    _check_mmcv_vectors(mmops.Correlation(max_displacement=0), "cuda", dtype)


@pytest.mark.cuda
def test_cuda_empty():
    e = torch.randn(2, 0, 4, 5, device="cuda", requires_grad=True)
    out = op(e, e.detach().clone().requires_grad_(True))
    assert out.shape == (2, 3, 3, 4, 5) and (out == 0).all()


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.correlation")
    _check_mmcv_vectors(ops.Correlation(max_displacement=0), "cpu", torch.float32)
    x1, x2 = make_inputs(2, 3, 6, 7, seed=17, dtype=torch.float64)
    layer = ops.Correlation(kernel_size=3, max_displacement=2, stride=1, padding=1, dilation=1, dilation_patch=1)
    torch.testing.assert_close(layer(x1, x2), op(x1, x2, [3, 3], 2, [1, 1], [1, 1], [1, 1], [1, 1]), rtol=0, atol=0)
    # the Function's own defaults (padding 1)
    torch.testing.assert_close(
        module.CorrelationFunction.apply(x1, x2), op(x1, x2, [1, 1], 1, [1, 1], [1, 1]), rtol=0, atol=0
    )
