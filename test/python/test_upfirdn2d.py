"""Tests of mmops::upfirdn2d: the conformance cases, then the float64 loop reference and the
conv2d composite (upfirdn2d_reference.py), hand-computed vectors (up, down, negative pads,
non-square kernels: the kernel is flipped), gradcheck and gradgradcheck (any-order autograd),
the Python wrapper's mmcv conventions, CUDA == CPU and the mmcv bridge."""

import importlib

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, run_with_default_cpu_capability
from upfirdn2d_reference import upfirdn2d_composite, upfirdn2d_ref

import mmops

op = torch.ops.mmops.upfirdn2d
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def binomial_kernel(taps=(1.0, 3.0, 3.0, 1.0), gain=1.0, dtype=torch.float32):
    """StyleGAN2's blur kernel: the outer product of the taps, normalised to sum 1, times gain."""
    t = torch.tensor(taps, dtype=torch.float64)
    k = torch.outer(t, t)
    return (k / k.sum() * gain).to(dtype)


def make_input(n, c, h, w, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, c, h, w, generator=g, dtype=torch.float64).to(dtype)


def make_kernel(kh, kw, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(kh, kw, generator=g, dtype=torch.float64).to(dtype)


# --------------------------------------------------------------------------- conformance

# (up, down, pad) of the conformance cases: StyleGAN2's upsample (4 x 4 kernel, up 2, pad (2, 1)),
# downsample (down 2, pad (1, 1)) and a general one (per-axis factors, negative pads)
CONFIGS = {
    "upfirdn2d_up2": ([2, 2], [1, 1], [2, 1, 2, 1]),
    "upfirdn2d_down2": ([1, 1], [2, 2], [1, 1, 1, 1]),
    "upfirdn2d_general": ([3, 2], [2, 3], [-1, 2, 3, -2]),
}


def _sample_of(config):
    up, down, pad = CONFIGS[config]

    def sample(device, dtype, size):
        n, c, h, w = (2, 3, 5, 7) if size == 0 else (3, 2, 6, 9)
        kh, kw = (4, 4) if config != "upfirdn2d_general" else ((3, 2) if size == 0 else (2, 3))
        x = make_input(n, c, h, w, seed=size, dtype=dtype).to(device)
        k = make_kernel(kh, kw, seed=size, dtype=dtype).to(device)
        return Sample((x, k, up, down, pad))

    return sample


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    k = torch.ones(2, 2, **f)
    return [
        Sample((torch.randn(0, 3, 4, 5, **f), k, [2, 2], [1, 1], [1, 0, 1, 0]), out_shapes=[(0, 3, 8, 10)]),
        Sample((torch.randn(2, 0, 4, 5, **f), k, [1, 1], [2, 2], [0, 0, 0, 0]), out_shapes=[(2, 0, 2, 2)]),
        # no input rows: the output reads only the zero padding
        Sample((torch.randn(1, 2, 0, 3, **f), k, [1, 1], [1, 1], [0, 0, 1, 1]), out_shapes=[(1, 2, 1, 2)]),
    ]


# CUDA paths: tiled (up, down in {1, 2}, kernel <= 4 x 4; partial tiles, several tiles, pads
# that crop), generic (other factors, larger kernels)
CUDA_SHAPES = [  # (N, C, H, W, kh, kw, up, down, pad)
    (2, 3, 17, 40, 4, 4, [2, 2], [1, 1], [2, 1, 2, 1]),
    (1, 5, 70, 33, 4, 4, [1, 1], [2, 2], [1, 1, 1, 1]),
    (2, 2, 20, 45, 3, 4, [1, 1], [1, 1], [1, 2, 2, 1]),
    (1, 4, 19, 21, 4, 2, [2, 2], [2, 2], [-3, 1, 0, -2]),
    (1, 3, 9, 11, 5, 7, [2, 3], [1, 2], [3, 3, -1, 4]),
    (2, 2, 8, 8, 1, 1, [4, 4], [3, 3], [0, 0, 0, 0]),
]


def _cuda_samples(dtype):
    for i, (n, c, h, w, kh, kw, up, down, pad) in enumerate(CUDA_SHAPES):
        yield Sample((make_input(n, c, h, w, seed=50 + i, dtype=dtype), make_kernel(kh, kw, seed=i), up, down, pad))


class _Net(torch.nn.Module):
    """upfirdn2d in a model: UpFirDn2d, the functional wrapper and the op on computed inputs."""

    def __init__(self, up, down, pad):
        super().__init__()
        self.up, self.down, self.pad = up, down, pad
        self.blur = mmops.UpFirDn2d(binomial_kernel(gain=4.0), up=2, padding=[2, 1, 2, 1])

    def forward(self, x: torch.Tensor, kernel: torch.Tensor):
        a = torch.ops.mmops.upfirdn2d(x * 2.0, kernel, self.up, self.down, self.pad)
        b = mmops.upfirdn2d(x.sin(), kernel, self.up, self.down, self.pad)
        return a + b, self.blur(x)


def _message(text):
    return f"mmops::upfirdn2d: .*{text}"


def _bad_inputs():
    return {
        "input_3d": BadInput(lambda x, k, u, d, p: (x[0], k, u, d, p), _message("input to be a 4-D"), meta=True),
        "int_input": BadInput(
            lambda x, k, u, d, p: (x.int(), k, u, d, p), _message("input to have a float"), meta=True
        ),
        "kernel_1d": BadInput(lambda x, k, u, d, p: (x, k[0], u, d, p), _message("kernel to be a 2-D"), meta=True),
        "kernel_3d": BadInput(lambda x, k, u, d, p: (x, k[None], u, d, p), _message("kernel to be a 2-D"), meta=True),
        "kernel_empty": BadInput(lambda x, k, u, d, p: (x, k[:0], u, d, p), _message("non-empty kernel"), meta=True),
        "int_kernel": BadInput(
            lambda x, k, u, d, p: (x, k.int(), u, d, p), _message("kernel to have a float"), meta=True
        ),
        "up_0": BadInput(
            lambda x, k, u, d, p: (x, k, [0, 1], d, p), _message("up factors in \\[1, 2\\^16\\]"), meta=True
        ),
        "down_0": BadInput(lambda x, k, u, d, p: (x, k, u, [1, 0], p), _message("down factors"), meta=True),
        "down_negative": BadInput(lambda x, k, u, d, p: (x, k, u, [-2, 1], p), _message("down factors"), meta=True),
        "up_huge": BadInput(lambda x, k, u, d, p: (x, k, [2**40, 1], d, p), _message("up factors"), meta=True),
        "up_3": BadInput(lambda x, k, u, d, p: (x, k, [1, 2, 3], d, p), _message("up to hold 2 values"), meta=True),
        "pad_3": BadInput(lambda x, k, u, d, p: (x, k, u, d, [0, 0, 0]), _message("pad to hold 4 values"), meta=True),
        "pad_huge": BadInput(lambda x, k, u, d, p: (x, k, u, d, [0, 2**41, 0, 0]), _message("pad values"), meta=True),
        "cropped_away": BadInput(
            lambda x, k, u, d, p: (x, k, u, d, [0, 0, -30, -30]), _message("output of at least 1 x 1"), meta=True
        ),
        "kernel_too_large": BadInput(
            lambda x, k, u, d, p: (x, torch.ones(40, 2, dtype=x.dtype), u, d, p), _message("at least the kernel")
        ),
    }


CONFORMANCE = [
    ConformanceCase(
        name,
        op,
        _sample_of(name),
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty if name == "upfirdn2d_up2" else None,
        module=(lambda cfg=CONFIGS[name]: _Net(*cfg)) if name == "upfirdn2d_up2" else None,
        cuda_samples=_cuda_samples if name == "upfirdn2d_up2" else None,
        nonzero_grads=True,
        bad_inputs=_bad_inputs() if name == "upfirdn2d_general" else {},
    )
    for name in CONFIGS
]


class TestUpfirdn2dConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- values

# (N, C, H, W, kh, kw, up, down, pad)
SHAPES = [
    (2, 3, 5, 6, 4, 4, [2, 2], [1, 1], [2, 1, 2, 1]),  # StyleGAN2 upsample
    (1, 2, 8, 7, 4, 4, [1, 1], [2, 2], [1, 1, 1, 1]),  # StyleGAN2 downsample
    (1, 2, 6, 6, 4, 4, [1, 1], [1, 1], [1, 2, 2, 1]),  # blur after a transposed conv
    (2, 1, 4, 5, 3, 2, [3, 1], [1, 2], [0, 2, 1, 0]),  # per-axis factors, non-square kernel
    (1, 2, 7, 5, 2, 5, [2, 3], [3, 2], [-2, 3, 4, -3]),  # negative pads crop
    (1, 1, 3, 4, 1, 1, [1, 1], [1, 1], [-1, -1, 0, -2]),  # identity kernel: a crop
    (1, 1, 1, 1, 5, 4, [4, 4], [1, 1], [2, 2, 1, 3]),  # one pixel
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(dtype):
    for i, (n, c, h, w, kh, kw, up, down, pad) in enumerate(SHAPES):
        x = make_input(n, c, h, w, seed=i, dtype=dtype)
        k = make_kernel(kh, kw, seed=i)
        out = op(x, k, up, down, pad)
        exp = upfirdn2d_ref(x, k, up, down, pad)
        assert out.dtype == dtype and out.shape == exp.shape, i
        tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else TOL[dtype]
        torch.testing.assert_close(out.double(), exp, **tol)
        torch.testing.assert_close(upfirdn2d_composite(x.double(), k.double(), up, down, pad), exp)


def test_matches_composite_on_larger_inputs():
    for up, down, pad in [
        ([2, 2], [1, 1], [2, 1, 2, 1]),
        ([1, 1], [2, 2], [1, 1, 1, 1]),
        ([2, 1], [3, 2], [5, -4, 2, 7]),
    ]:
        x = make_input(2, 8, 33, 40, seed=3, dtype=torch.float64)
        k = binomial_kernel(gain=4.0, dtype=torch.float64)
        torch.testing.assert_close(
            op(x, k, up, down, pad), upfirdn2d_composite(x, k, up, down, pad), rtol=1e-12, atol=1e-12
        )


def _separable(kh, kw, seed, dtype=torch.float64, gain=1.0):
    """A kernel that is the outer product of two random 1-D filters, computed in dtype."""
    g = torch.Generator().manual_seed(100 + seed)
    col = torch.randn(kh, generator=g, dtype=torch.float64).to(dtype)
    row = torch.randn(kw, generator=g, dtype=torch.float64).to(dtype)
    return torch.outer(col, row) * gain


def _check_cpu_paths():
    """The CPU kernel's paths against the float64 reference on every geometry of SHAPES: a kernel
    that is an outer product (to within rounding) runs as two 1-D passes, any other as a 2-D
    sum. float64: a separable kernel, one a tap off rank 1 and a random one; float32 and
    bfloat16: an outer product rounded in float32 times a gain (StyleGAN's 1-D filters)."""
    for i, (n, c, h, w, kh, kw, up, down, pad) in enumerate(SHAPES):
        x = make_input(n, c, h, w, seed=i, dtype=torch.float64)
        k = _separable(kh, kw, i)
        off = k.clone()
        off[kh // 2, kw // 2] *= 1 + 1e-9
        for kernel in (k, off, make_kernel(kh, kw, seed=i, dtype=torch.float64)):
            exp = upfirdn2d_ref(x, kernel, up, down, pad)
            torch.testing.assert_close(op(x, kernel, up, down, pad), exp, rtol=1e-12, atol=1e-12)
        k32 = _separable(kh, kw, i, torch.float32, gain=4.0)
        for dtype in (torch.float32, torch.bfloat16):
            out = op(x.to(dtype), k32, up, down, pad)
            torch.testing.assert_close(out.double(), upfirdn2d_ref(x.to(dtype), k32, up, down, pad), **TOL[dtype])


def test_cpu_paths_match_reference():
    _check_cpu_paths()


def test_baseline_cpu_loops_match_reference():
    # The CPU loops exist for the baseline ISA and for AVX2 + FMA: the baseline ones here.
    run_with_default_cpu_capability("test_upfirdn2d", "_check_cpu_paths")


def _row(values):
    return torch.tensor(values, dtype=torch.float64).reshape(1, 1, 1, -1)


def test_known_vectors():
    one = torch.ones(1, 1, dtype=torch.float64)
    # zero insertion: up 2 puts each pixel first in its 2 x 2 block
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]], dtype=torch.float64)
    assert op(x, one, [2, 2]).tolist() == [[[[1, 0, 2, 0], [0, 0, 0, 0], [3, 0, 4, 0], [0, 0, 0, 0]]]]
    # the kernel is flipped (a convolution): [a, b, c] with [[1, 2]] gives [2a + b, 2b + c]
    assert op(_row([1.0, 10.0, 100.0]), torch.tensor([[1.0, 2.0]], dtype=torch.float64)).flatten().tolist() == [
        12.0,
        120.0,
    ]
    # up 2 along x, kernel [[1, 2, 3, 4]], pad x (2, 1): the full convolution of [1, 0, 2, 0]
    # with [1, 2, 3, 4] is [1, 2, 5, 8, 6, 8, 0]; pads (2, 1) keep [2, 5, 8, 6]
    k4 = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    assert op(_row([1.0, 2.0]), k4, [2, 1], [1, 1], [2, 1, 0, 0]).flatten().tolist() == [2.0, 5.0, 8.0, 6.0]
    # the same along y: up [1, 2], pad [0, 0, 2, 1], kernel transposed
    col = _row([1.0, 2.0]).transpose(2, 3)
    assert op(col, k4.t(), [1, 2], [1, 1], [0, 0, 2, 1]).flatten().tolist() == [2.0, 5.0, 8.0, 6.0]
    # down 2 keeps every other sample from the first: [1..6] with [[1, 1]] -> [3, 7, 11]
    assert op(_row(range(1, 7)), torch.ones(1, 2, dtype=torch.float64), 1, [2, 1]).flatten().tolist() == [3, 7, 11]
    # negative pads crop: [1..5] with pad x (-1, -2) -> [2, 3]
    assert op(_row(range(1, 6)), one, 1, 1, [-1, -2, 0, 0]).flatten().tolist() == [2.0, 3.0]
    # StyleGAN2's upsample of a constant: 1 inside, the border taps see the zero padding
    up = op(
        torch.ones(1, 1, 4, 4, dtype=torch.float64), binomial_kernel(gain=4.0, dtype=torch.float64), 2, 1, [2, 1, 2, 1]
    )
    assert up.shape == (1, 1, 8, 8) and (up[0, 0, 1:-1, 1:-1] == 1).all()
    assert up[0, 0, 0, 0].item() == pytest.approx(9 / 16) and up[0, 0, 0, 3].item() == pytest.approx(3 / 4)


def test_output_size_formula():
    for h, up, pad0, pad1, k, down in [(5, 2, 2, 1, 4, 1), (8, 1, 1, 1, 4, 2), (7, 3, -2, 3, 2, 3), (1, 1, 0, 0, 1, 5)]:
        x = torch.zeros(1, 1, h, 2)
        out = op(x, torch.ones(k, 1), [1, up], [1, down], [0, 0, pad0, pad1])
        assert out.shape[2] == (h * up + pad0 + pad1 - k) // down + 1


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("shape", SHAPES[:5], ids=["up2", "down2", "blur", "factors", "crop"])
def test_gradcheck_and_gradgradcheck(shape):
    n, c, h, w, kh, kw, up, down, pad = shape
    x = make_input(n, c, min(h, 5), min(w, 5), seed=7, dtype=torch.float64).requires_grad_(True)
    k = make_kernel(kh, kw, seed=7, dtype=torch.float64)
    fn = lambda t: op(t, k, up, down, pad)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


def test_gradient_matches_reference():
    for i, (n, c, h, w, kh, kw, up, down, pad) in enumerate(SHAPES):
        x = make_input(n, c, h, w, seed=i, dtype=torch.float64).requires_grad_(True)
        k = make_kernel(kh, kw, seed=i, dtype=torch.float64)
        out = op(x, k, up, down, pad)
        go = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(i))
        (g,) = torch.autograd.grad(out, x, go)
        xr = x.detach().requires_grad_(True)
        (gr,) = torch.autograd.grad(upfirdn2d_composite(xr, k, up, down, pad), xr, go)
        torch.testing.assert_close(g, gr, rtol=1e-12, atol=1e-12)


def test_r1_penalty_second_order():
    # StyleGAN2's R1: the gradient of |d out / d x|^2 w.r.t. the weights before the op
    k = binomial_kernel(gain=4.0, dtype=torch.float64)
    w = torch.randn(2, 3, 4, 4, dtype=torch.float64, requires_grad=True)
    x = make_input(2, 3, 4, 4, seed=8, dtype=torch.float64).requires_grad_(True)

    def penalty(fn):
        out = fn(x * w)
        (gx,) = torch.autograd.grad((out**2).sum(), x, create_graph=True)
        (gw,) = torch.autograd.grad(gx.pow(2).sum(), w)
        return gw

    ours = penalty(lambda t: op(t, k, 2, 1, [2, 1, 2, 1]))
    theirs = penalty(lambda t: upfirdn2d_composite(t, k, (2, 2), (1, 1), (2, 1, 2, 1)))
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_third_order():
    k = make_kernel(3, 2, seed=9, dtype=torch.float64)
    x = make_input(1, 2, 3, 4, seed=9, dtype=torch.float64).requires_grad_(True)

    def f(t):
        return op(t, k, [2, 1], [1, 2], [1, 0, -1, 2])

    g1 = torch.autograd.grad(f(x).pow(3).sum(), x, create_graph=True)[0]
    g2 = torch.autograd.grad(g1.pow(2).sum(), x, create_graph=True)[0]
    g3 = torch.autograd.grad(g2.sum(), x)[0]

    def c(t):
        return upfirdn2d_composite(t, k, (2, 1), (1, 2), (1, 0, -1, 2))

    h1 = torch.autograd.grad(c(x).pow(3).sum(), x, create_graph=True)[0]
    h2 = torch.autograd.grad(h1.pow(2).sum(), x, create_graph=True)[0]
    h3 = torch.autograd.grad(h2.sum(), x)[0]
    torch.testing.assert_close(g3, h3, rtol=1e-10, atol=1e-10)


def test_kernel_that_requires_grad_is_refused():
    x = make_input(1, 1, 3, 3)
    k = torch.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="mmops::upfirdn2d: kernel gets no gradient"):
        op(x, k)
    with torch.no_grad():
        assert op(x, k).shape == (1, 1, 2, 2)
    assert op(x, k.detach()).shape == (1, 1, 2, 2)


# --------------------------------------------------------------------------- wrapper and module


def test_wrapper_conventions():
    x = make_input(2, 3, 6, 7, seed=10, dtype=torch.float64)
    k = make_kernel(3, 3, seed=10, dtype=torch.float64)
    # padding: int, [x, y] and [x0, x1, y0, y1]; up / down: int or [x, y]
    torch.testing.assert_close(mmops.upfirdn2d(x, k, padding=2), op(x, k, 1, 1, [2, 2, 2, 2]), rtol=0, atol=0)
    torch.testing.assert_close(mmops.upfirdn2d(x, k, padding=(1, 3)), op(x, k, 1, 1, [1, 1, 3, 3]), rtol=0, atol=0)
    torch.testing.assert_close(
        mmops.upfirdn2d(x, k, up=(2, 1), down=[1, 2], padding=[0, 1, 2, 3]),
        op(x, k, [2, 1], [1, 2], [0, 1, 2, 3]),
        rtol=0,
        atol=0,
    )
    # flip_filter: correlation; gain: a factor
    torch.testing.assert_close(mmops.upfirdn2d(x, k, flip_filter=True), op(x, k.flip([0, 1])), rtol=0, atol=0)
    torch.testing.assert_close(mmops.upfirdn2d(x, k, gain=3.0), op(x, k * 3.0), rtol=0, atol=0)
    # a separable [taps] filter: the same taps along x and y; None: identity
    t = torch.tensor([1.0, 3.0, 3.0, 1.0], dtype=torch.float64)
    torch.testing.assert_close(mmops.upfirdn2d(x, t, up=2), op(x, torch.outer(t, t), 2), rtol=0, atol=0)
    torch.testing.assert_close(mmops.upfirdn2d(x, None), x, rtol=0, atol=0)
    with pytest.raises(ValueError, match="padding"):
        mmops.upfirdn2d(x, k, padding=[1, 2, 3])


def test_float32_kernel_with_other_input_dtypes():
    # mmcv's filters are float32 whatever the input: the kernel's values are used in the
    # accumulation type
    k = binomial_kernel(gain=4.0)
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        x = make_input(1, 2, 5, 5, seed=11, dtype=dtype)
        out = op(x, k, 2, 1, [2, 1, 2, 1])
        assert out.dtype == dtype
        torch.testing.assert_close(out.double(), upfirdn2d_ref(x, k, (2, 2), (1, 1), (2, 1, 2, 1)), **TOL[dtype])


def test_module_and_scripting():
    module = mmops.UpFirDn2d(torch.tensor([1.0, 3.0, 3.0, 1.0]), up=2, padding=[2, 1, 2, 1], gain=4.0)
    assert repr(module) == "UpFirDn2d(kernel_size=[4, 4], up=[2, 2], down=[1, 1], padding=[2, 1, 2, 1])"
    x = make_input(1, 2, 5, 5, seed=12)
    torch.testing.assert_close(module(x), op(x, module.kernel, 2, 1, [2, 1, 2, 1]), rtol=0, atol=0)
    scripted = torch.jit.script(module)
    torch.testing.assert_close(scripted(x), module(x), rtol=0, atol=0)


def test_strided_and_channels_last_inputs():
    x = make_input(2, 3, 6, 7, seed=13)
    k = make_kernel(4, 4, seed=13)
    exp = op(x, k, 2, 1, [2, 1, 2, 1])
    wide = torch.randn(2, 6, 6, 14)[:, ::2, :, ::2]
    wide.copy_(x)
    assert not wide.is_contiguous()
    torch.testing.assert_close(op(wide, k, 2, 1, [2, 1, 2, 1]), exp, rtol=0, atol=0)
    torch.testing.assert_close(
        op(x.contiguous(memory_format=torch.channels_last), k, 2, 1, [2, 1, 2, 1]), exp, rtol=0, atol=0
    )
    torch.testing.assert_close(op(x, torch.randn(4, 8)[:, ::2].copy_(k), 2, 1, [2, 1, 2, 1]), exp, rtol=0, atol=0)


def test_cpu_results_do_not_depend_on_the_thread_count():
    x = make_input(2, 16, 20, 23, seed=14)
    k = make_kernel(4, 4, seed=14)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = op(x, k, 2, 1, [2, 1, 2, 1])
        torch.set_num_threads(max(2, threads))
        b = op(x, k, 2, 1, [2, 1, 2, 1])
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(a, b)


def test_autocast_runs_in_float32():
    x = make_input(1, 2, 5, 5, seed=15)
    k = binomial_kernel(gain=4.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x.bfloat16(), k, 2, 1, [2, 1, 2, 1])
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, op(x.bfloat16().float(), k, 2, 1, [2, 1, 2, 1]).bfloat16(), rtol=0, atol=0)


def test_nan_and_inf_stay_local():
    x = torch.zeros(1, 1, 6, 6, dtype=torch.float64)
    x[0, 0, 2, 3] = float("nan")
    out = op(x, torch.ones(2, 2, dtype=torch.float64))
    nan = torch.isnan(out[0, 0])
    assert nan.sum() == 4 and nan[1:3, 2:4].all()  # exactly the outputs whose taps read it


def test_huge_sizes_give_our_error():
    x = torch.empty(1, 1, 2**30, 4, device="meta")
    with pytest.raises(RuntimeError, match="mmops::upfirdn2d: .*at most 2\\^31 - 1 on each side"):
        op(x, torch.empty(1, 1, device="meta"), [1, 4])
    with pytest.raises(RuntimeError, match="mmops::upfirdn2d: .*H and W to be at most"):
        op(torch.empty(1, 1, 2**31, 1, device="meta"), torch.empty(1, 1, device="meta"))


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu(dtype):
    for i, (n, c, h, w, kh, kw, up, down, pad) in enumerate(CUDA_SHAPES + SHAPES):
        x = make_input(n, c, h, w, seed=20 + i, dtype=dtype)
        k = make_kernel(kh, kw, seed=i)
        out = op(x, k, up, down, pad)
        out_c = op(x.cuda(), k.cuda(), up, down, pad)
        torch.testing.assert_close(out_c.cpu(), out, **TOL[dtype])
        torch.testing.assert_close(out_c.double().cpu(), upfirdn2d_ref(x, k, up, down, pad), **TOL[dtype])


@pytest.mark.cuda
def test_cuda_stylegan_shapes_and_second_order():
    k = binomial_kernel(gain=4.0).cuda()
    x = torch.randn(2, 64, 32, 32, device="cuda", requires_grad=True)
    for up, down, pad in [(2, 1, [2, 1, 2, 1]), (1, 2, [1, 1, 1, 1]), (1, 1, [1, 2, 1, 2])]:
        out = op(x, k, [up, up], [down, down], pad)
        exp = upfirdn2d_composite(x.detach().double(), k.double(), (up, up), (down, down), pad)
        torch.testing.assert_close(out.double(), exp, rtol=1e-5, atol=1e-5)
        (g,) = torch.autograd.grad(out.square().sum(), x, create_graph=True)
        (gg,) = torch.autograd.grad(g.square().sum(), x)
        xd = x.detach().double().requires_grad_(True)
        (h,) = torch.autograd.grad(
            upfirdn2d_composite(xd, k.double(), (up, up), (down, down), pad).square().sum(), xd, create_graph=True
        )
        (hh,) = torch.autograd.grad(h.square().sum(), xd)
        torch.testing.assert_close(gg.double(), hh, rtol=1e-4, atol=1e-4)
    xs = torch.randn(2, 2, 3, 3, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda t: op(t, k.double(), 2, 1, [2, 1, 2, 1]), (xs,))


@pytest.mark.cuda
def test_cuda_many_planes_and_empty():
    # more planes than the grid's z limit (the planes loop) and empty inputs
    x = torch.randn(70000, 1, 3, 3, device="cuda")
    k = binomial_kernel(gain=4.0).cuda()
    torch.testing.assert_close(op(x, k, 2, 1, [2, 1, 2, 1]).cpu(), op(x.cpu(), k.cpu(), 2, 1, [2, 1, 2, 1]))
    e = torch.randn(0, 3, 4, 4, device="cuda", requires_grad=True)
    out = op(e, k, 2, 1, [2, 1, 2, 1])
    assert out.shape == (0, 3, 8, 8)
    out.sum().backward()
    assert e.grad.shape == e.shape


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.upfirdn2d")
    x = make_input(2, 3, 6, 7, seed=16, dtype=torch.float64)
    f = torch.tensor([1.0, 3.0, 3.0, 1.0])
    k2 = torch.outer(f, f)
    # mmcv.ops.upfirdn2d (every device; mmcv's reference path for comparison)
    for kwargs in [
        dict(up=2, padding=[2, 1, 2, 1]),
        dict(down=2, padding=1),
        dict(up=(2, 1), down=(1, 2), padding=(1, 2)),
    ]:
        for filt in (f, k2, None):
            for extra in (dict(), dict(flip_filter=True, gain=3.0)):
                ours = ops.upfirdn2d(x, filt, **kwargs, **extra)
                theirs = module._upfirdn2d_ref(x, filt, **kwargs, **extra)
                # mmcv scales each pass of a separable filter by float32(sqrt(gain)): float32 rounding
                tol = 1e-5 if filt is not None and filt.dim() == 1 and extra else 1e-12
                torch.testing.assert_close(ours, theirs, rtol=tol, atol=tol)
    # filter2d / upsample2d / downsample2d call the module's upfirdn2d: routed too
    torch.testing.assert_close(ops.upsample2d(x, f), module._upfirdn2d_ref(x, f, up=2, padding=[2, 1, 2, 1], gain=4))
    # the ext kernel contract (mmcv's CUDA Function calls it): (x, f, upx, upy, downx, downy,
    # padx0, padx1, pady0, pady1, flip, gain)
    y = module.ext_module.upfirdn2d(x, k2, 2, 1, 1, 2, 2, 1, 0, 1, True, 2.0)
    torch.testing.assert_close(y, op(x, k2.flip([0, 1]) * 2.0, [2, 1], [1, 2], [2, 1, 0, 1]), rtol=1e-12, atol=1e-12)
    # second order through the bridge
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(ops.upfirdn2d(xg, f, up=2, padding=[2, 1, 2, 1]).square().sum(), xg, create_graph=True)
    assert g.requires_grad


# --------------------------------------------------------------------------- CUDA tile emulation


def _floor_div(a, b):
    return a // b  # Python's // floors, as upfirdn2d_math.h's floor_div


def _tiled_emulation(x, k, up, down, pad0_y, pad0_x, out_h, out_w):
    """upfirdn2d_tiled_kernel's index arithmetic on one plane x [H, W] (float64): tile shape and
    input rectangle of the kernel's template constants, the local tap indices, the bounds of
    the shared tile asserted (an out-of-bounds read would be a bug on the GPU)."""
    kmax = 4
    tile_h, tile_w = (32 if up == 2 else 16), 32
    in_th = ((tile_h - 1) * down + kmax - 1 + up - 1) // up + 1
    in_tw = ((tile_w - 1) * down + kmax - 1 + up - 1) // up + 1
    h, w = x.shape
    kh, kw = k.shape
    flipped = torch.zeros(kmax, kmax, dtype=torch.float64)
    flipped[:kh, :kw] = k.flip([0, 1])
    out = torch.full((out_h, out_w), float("nan"), dtype=torch.float64)
    taps = (kmax + up - 1) // up
    for by in range((out_h + tile_h - 1) // tile_h):
        for bx in range((out_w + tile_w - 1) // tile_w):
            oy0, ox0 = by * tile_h, bx * tile_w
            my0, mx0 = oy0 * down - pad0_y, ox0 * down - pad0_x
            iy0, ix0 = _floor_div(my0, up), _floor_div(mx0, up)
            tile = torch.zeros(in_th, in_tw, dtype=torch.float64)
            for ly in range(in_th):
                for lx in range(in_tw):
                    y, xx = iy0 + ly, ix0 + lx
                    if 0 <= y < h and 0 <= xx < w:
                        tile[ly, lx] = x[y, xx]
            for ty in range(tile_h):
                for tx in range(tile_w):
                    if oy0 + ty >= out_h or ox0 + tx >= out_w:
                        continue
                    my, mx = my0 + ty * down, mx0 + tx * down
                    ky0, kx0 = (-my) % up, (-mx) % up
                    ly0, lx0 = _floor_div(my + ky0, up) - iy0, _floor_div(mx + kx0, up) - ix0
                    acc = 0.0
                    for jy in range(taps):
                        ky = ky0 + jy * up
                        if ky >= kh:
                            continue
                        for jx in range(taps):
                            kx = kx0 + jx * up
                            if kx >= kw:
                                continue
                            assert 0 <= ly0 + jy < in_th and 0 <= lx0 + jx < in_tw
                            acc += tile[ly0 + jy, lx0 + jx].item() * flipped[ky, kx].item()
                    out[oy0 + ty, ox0 + tx] = acc
    return out


@pytest.mark.parametrize(
    "up,down,pad,kernel",
    [
        (2, 1, [2, 1, 2, 1], (4, 4)),
        (1, 2, [1, 1, 1, 1], (4, 4)),
        (1, 1, [-2, 3, 1, 0], (3, 4)),
        (2, 2, [-3, 1, 2, -2], (2, 3)),
    ],
)
def test_cuda_tile_indexing_emulation(up, down, pad, kernel):
    # a map of two tiles along x (partial second one) and a partial tile along y
    x = make_input(1, 1, 9, 21, seed=30, dtype=torch.float64)
    k = make_kernel(*kernel, seed=30, dtype=torch.float64)
    exp = op(x, k, up, down, pad)[0, 0]
    got = _tiled_emulation(x[0, 0], k, up, down, pad[2], pad[0], exp.shape[0], exp.shape[1])
    torch.testing.assert_close(got, exp, rtol=1e-12, atol=1e-12)
