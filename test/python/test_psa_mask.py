"""Tests of mmops::psa_mask: the conformance cases, then a float64 loop reference
written from the definition, known vectors, gradcheck, CUDA == CPU and the mmcv bridge."""

import importlib

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import deterministic_algorithms
from psa_mask_reference import psa_mask_ref

import mmops

op = torch.ops.mmops.psa_mask
TYPES = ["collect", "distribute"]


# --------------------------------------------------------------------------- conformance


def _sample_of(psa_type):
    def sample(device, dtype, size):
        n_, h, w, mh, mw = (2, 4, 6, 3, 5) if size == 0 else (3, 7, 8, 3, 5)  # one module: one mask size
        g = torch.Generator().manual_seed(50 + size)
        x = torch.randn(n_, mh * mw, h, w, dtype=torch.float64, generator=g).to(dtype)
        return Sample((x.to(device), psa_type, [mh, mw]))

    return sample


def _empty_of(psa_type):
    def empty(device, dtype):
        f = dict(dtype=dtype, device=device)
        return [
            Sample((torch.randn(0, 9, 3, 4, **f), psa_type, [3, 3]), out_shapes=[(0, 12, 3, 4)]),
            Sample((torch.randn(2, 9, 0, 4, **f), psa_type, [3, 3]), out_shapes=[(2, 0, 0, 4)]),
        ]

    return empty


class _Net(torch.nn.Module):
    def __init__(self, psa_type: str):
        super().__init__()
        self.psa = mmops.PSAMask(psa_type, (3, 5))
        self.psa_type = psa_type

    def forward(self, x: torch.Tensor):
        both = self.psa(x * 2.0).sin() + mmops.psa_mask(x, self.psa_type, [3, 5])
        return both, torch.ops.mmops.psa_mask(x * 0.5, self.psa_type, [3, 5])


def _helpers(sample):
    x, psa_type, mask_size = sample.args
    out = op(x, psa_type, mask_size)
    return [(torch.ops.mmops._psa_mask_backward, (torch.randn_like(out), psa_type, mask_size))]


def _message(text):
    return f"mmops::psa_mask: .*{text}"


def _case(psa_type):
    return ConformanceCase(
        f"psa_mask_{psa_type}",
        op,
        _sample_of(psa_type),
        grad_args=(0,),
        nonzero_grads=True,
        empty=_empty_of(psa_type),
        module=lambda: _Net(psa_type),
        helpers=_helpers,
        bad_inputs={
            "input_3d": BadInput(lambda x, t, m: (x[0], t, m), _message("input"), meta=True),
            "int_input": BadInput(lambda x, t, m: (x.int(), t, m), _message("input"), meta=True),
            "channels": BadInput(lambda x, t, m: (x[:, 1:], t, m), _message("mask_h \\* mask_w"), meta=True),
            "psa_type": BadInput(lambda x, t, m: (x, "gather", m), _message("psa_type"), meta=True),
            "mask_size_1": BadInput(lambda x, t, m: (x, t, m[:1]), _message("mask_size"), meta=True),
            "mask_size_0": BadInput(lambda x, t, m: (x, t, [0, m[1]]), _message("mask_size"), meta=True),
        },
    )


CONFORMANCE = [_case(t) for t in TYPES]


class TestPsaMaskConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def grad_of(x, psa_type, mask_size, go):
    x = x.detach().requires_grad_(True)
    out = op(x, psa_type, mask_size)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


def ref_grad_of(x, psa_type, mask_size, go):
    xd = x.detach().double().requires_grad_(True)
    out = psa_mask_ref(xd, psa_type, mask_size)
    (g,) = torch.autograd.grad(out, xd, go.double())
    return out.detach(), g


# (N, H, W, mask_h, mask_w): PSANet's mask 2H-1 x 2W-1 (every pixel sees the whole map),
# smaller and larger masks, even sizes (centre (mask - 1) // 2), 1x1.
SHAPES = [(2, 4, 5, 7, 9), (1, 6, 3, 3, 3), (2, 3, 4, 4, 2), (1, 5, 5, 11, 1), (3, 2, 2, 1, 1), (1, 1, 7, 1, 13)]


@pytest.mark.parametrize("psa_type", TYPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_matches_reference(psa_type, dtype):
    g = torch.Generator().manual_seed(1)
    for n_, h, w, mh, mw in SHAPES:
        x = torch.randn(n_, mh * mw, h, w, generator=g).to(dtype)
        go = torch.randn(n_, h * w, h, w, generator=g).to(dtype)
        out, grad = grad_of(x, psa_type, [mh, mw], go)
        exp, gexp = ref_grad_of(x, psa_type, [mh, mw], go)
        assert out.dtype == dtype and out.shape == (n_, h * w, h, w)
        torch.testing.assert_close(out.double(), exp, rtol=0, atol=0)  # copies and zeros: exact
        torch.testing.assert_close(grad.double(), gexp, rtol=0, atol=0)


def test_reference_matches_hand_computed_vectors():
    # H = 1, W = 3, mask 1 x 3 (centre 1): entry j of pixel w belongs to pixel w + j - 1.
    x = torch.arange(1.0, 10.0, dtype=torch.float64).reshape(1, 3, 1, 3)  # x[0, j, 0, w] = 1 + 3j + w
    collect = torch.tensor(
        [[[[4.0, 2.0, 0.0]], [[7.0, 5.0, 3.0]], [[0.0, 8.0, 6.0]]]], dtype=torch.float64
    )  # [y, 0, w] = x[y - w + 1, w]
    distribute = collect.transpose(1, 3).contiguous()  # [w, 0, y]: the same entries, swapped
    for psa_type, exp in (("collect", collect), ("distribute", distribute)):
        torch.testing.assert_close(psa_mask_ref(x, psa_type, [1, 3]), exp, rtol=0, atol=0)
        torch.testing.assert_close(op(x, psa_type, [1, 3]), exp, rtol=0, atol=0)


def test_psanet_mask_covers_every_pair():
    # mask 2H-1 x 2W-1: every (pixel, pixel) pair gets exactly one entry, nothing is 0.
    x = torch.rand(2, 5 * 7, 3, 4, dtype=torch.float64) + 1.0
    for psa_type in TYPES:
        out = op(x, psa_type, [5, 7])
        assert (out > 0).all()
        # each input entry lands once: the sums agree with the entries whose target is inside
        torch.testing.assert_close(out.sum(), psa_mask_ref(x, psa_type, [5, 7]).sum())


def test_collect_and_distribute_are_transposes():
    x = torch.randn(2, 15, 4, 5, dtype=torch.float64)
    c = op(x, "collect", [3, 5]).reshape(2, 20, 20)
    d = op(x, "distribute", [3, 5]).reshape(2, 20, 20)
    torch.testing.assert_close(c, d.transpose(1, 2), rtol=0, atol=0)


@pytest.mark.parametrize("psa_type", TYPES)
def test_gradcheck(psa_type):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3 * 5, 3, 4, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: op(t, psa_type, [3, 5]), (x,))
    y = torch.randn(1, 4 * 2, 4, 3, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: op(t, psa_type, [4, 2]), (y,))


def test_strided_input():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 18, 4, 10, generator=g)[:, ::2, :, ::2]
    assert not x.is_contiguous()
    for psa_type in TYPES:
        torch.testing.assert_close(op(x, psa_type, [3, 3]), op(x.contiguous(), psa_type, [3, 3]), rtol=0, atol=0)
        cl = x.contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(op(cl, psa_type, [3, 3]), op(x.contiguous(), psa_type, [3, 3]), rtol=0, atol=0)


def test_module_and_functional():
    x = torch.randn(1, 9, 3, 3)
    for psa_type in TYPES:
        module = mmops.PSAMask(psa_type, 3)
        assert module.mask_size == [3, 3] and psa_type in repr(module)
        torch.testing.assert_close(module(x), mmops.psa_mask(x, psa_type, [3, 3]), rtol=0, atol=0)
    with pytest.raises(ValueError, match="psa_type"):
        mmops.PSAMask("both", 3)


def test_deterministic_mode_gives_the_reference_gradient():
    x = torch.randn(2, 9, 4, 4, dtype=torch.float64, requires_grad=True)
    with deterministic_algorithms():
        op(x, "collect", [3, 3]).sum().backward()
    _, gexp = ref_grad_of(x, "collect", [3, 3], torch.ones(2, 16, 4, 4, dtype=torch.float64))
    torch.testing.assert_close(x.grad, gexp, rtol=0, atol=0)
    assert (gexp == 0).any() and (gexp == 1).any()  # entries pointing outside the map get none


def test_autocast_keeps_the_dtype():
    x = torch.randn(1, 9, 3, 3).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x, "distribute", [3, 3])
    assert out.dtype == torch.bfloat16 and torch.equal(out, op(x.float(), "distribute", [3, 3]).bfloat16())


def test_double_backward_refused():
    x = torch.randn(1, 9, 3, 3, dtype=torch.float64, requires_grad=True)
    go = torch.randn(1, 9, 3, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(x, "collect", [3, 3]), x, go, create_graph=True)


@pytest.mark.parametrize("bad", [[-1, 3], [3, 0]])
def test_backward_helper_checks(bad):
    go = torch.randn(1, 9, 3, 3)
    with pytest.raises(RuntimeError, match="mmops::psa_mask: .*mask_size"):
        torch.ops.mmops._psa_mask_backward(go, "collect", bad)
    with pytest.raises(RuntimeError, match="mmops::psa_mask: .*grad_output of shape"):
        torch.ops.mmops._psa_mask_backward(torch.randn(1, 8, 3, 3), "collect", [3, 3])


def test_huge_output_gives_our_error():
    # N * (H * W)^2 overflows int64 long before memory: the check runs on sizes only (meta).
    x = torch.empty(1, 1, 2**20, 2**20, device="meta")
    with pytest.raises(RuntimeError, match="mmops::psa_mask: .*element count"):
        op(x, "collect", [1, 1])


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("psa_type", TYPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_cuda_matches_cpu(psa_type, dtype):
    g = torch.Generator().manual_seed(7)
    for n_, h, w, mh, mw in SHAPES + [(2, 33, 17, 65, 33)]:
        x = torch.randn(n_, mh * mw, h, w, generator=g).to(dtype)
        go = torch.randn(n_, h * w, h, w, generator=g).to(dtype)
        out, grad = grad_of(x, psa_type, [mh, mw], go)
        out_c, grad_c = grad_of(x.cuda(), psa_type, [mh, mw], go.cuda())
        torch.testing.assert_close(out_c.cpu(), out, rtol=0, atol=0)
        torch.testing.assert_close(grad_c.cpu(), grad, rtol=0, atol=0)


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.psa_mask")
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 15, 4, 5, dtype=torch.float64, generator=g)
    for enum, psa_type in enumerate(TYPES):
        exp = op(x, psa_type, [3, 5])
        xm = x.clone().requires_grad_(True)
        out = ops.PSAMask(psa_type, (3, 5))(xm)
        torch.testing.assert_close(out, exp, rtol=0, atol=0)
        go = torch.randn(out.shape, dtype=torch.float64, generator=g)
        (grad,) = torch.autograd.grad(out, xm, go)
        torch.testing.assert_close(grad, torch.ops.mmops._psa_mask_backward(go, psa_type, [3, 5]), rtol=0, atol=0)
        torch.testing.assert_close(module.psa_mask(x, enum, (3, 5)), exp, rtol=0, atol=0)
        # mmcv's kernel contract: fills output / grad_input
        filled = x.new_zeros(exp.shape)
        module.ext_module.psamask_forward(
            x, filled, psa_type=enum, num_=2, h_feature=4, w_feature=5, h_mask=3, w_mask=5, half_h_mask=1, half_w_mask=2
        )
        torch.testing.assert_close(filled, exp, rtol=0, atol=0)
        grad_in = torch.zeros_like(x)
        module.ext_module.psamask_backward(
            go,
            grad_in,
            psa_type=enum,
            num_=2,
            h_feature=4,
            w_feature=5,
            h_mask=3,
            w_mask=5,
            half_h_mask=1,
            half_w_mask=2,
        )
        torch.testing.assert_close(grad_in, grad, rtol=0, atol=0)
