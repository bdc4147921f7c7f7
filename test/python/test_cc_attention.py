"""Tests of mmops::ca_weight and mmops::ca_map (criss-cross attention, CCNet): the conformance
cases, then float64 references (an einsum composite and, on small inputs, loops over the
definition), known vectors of the entry order, gradcheck, the CrissCrossAttention module
against mmcv 2.x's forward math, CUDA == CPU and the mmcv bridge."""

import pytest
import torch
from cc_attention_reference import (
    ca_map_loops,
    ca_map_ref,
    ca_weight_loops,
    ca_weight_ref,
    criss_cross_attention_mmcv2,
)
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL

import mmops

ca_weight = torch.ops.mmops.ca_weight
ca_map = torch.ops.mmops.ca_map
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def randn(*shape, seed, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


# --------------------------------------------------------------------------- conformance


def _weight_sample(device, dtype, size):
    n, c, h, w = (2, 3, 4, 5) if size == 0 else (3, 5, 6, 3)
    return Sample(
        (
            randn(n, c, h, w, seed=10 + size, dtype=dtype).to(device),
            randn(n, c, h, w, seed=20 + size, dtype=dtype).to(device),
        )
    )


def _map_sample(device, dtype, size):
    # No size equals another (L = H + W - 1 = 9 or 10 included): duck sizing would tie them.
    n, h, w = (2, 4, 6) if size == 0 else (3, 7, 4)
    weight = randn(n, h + w - 1, h, w, seed=30 + size).softmax(1).to(dtype)
    return Sample((weight.to(device), randn(n, 8, h, w, seed=40 + size, dtype=dtype).to(device)))


def _weight_empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample((torch.randn(0, 3, 4, 5, **f), torch.randn(0, 3, 4, 5, **f)), out_shapes=[(0, 8, 4, 5)]),
        Sample((torch.randn(2, 0, 4, 5, **f), torch.randn(2, 0, 4, 5, **f)), out_shapes=[(2, 8, 4, 5)]),
        Sample((torch.randn(2, 3, 0, 5, **f), torch.randn(2, 3, 0, 5, **f)), out_shapes=[(2, 4, 0, 5)]),
    ]


def _map_empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample((torch.randn(0, 8, 4, 5, **f), torch.randn(0, 3, 4, 5, **f)), out_shapes=[(0, 3, 4, 5)]),
        Sample((torch.randn(2, 8, 4, 5, **f), torch.randn(2, 0, 4, 5, **f)), out_shapes=[(2, 0, 4, 5)]),
        Sample((torch.randn(2, 3, 4, 0, **f), torch.randn(2, 5, 4, 0, **f)), out_shapes=[(2, 5, 4, 0)]),
    ]


class _WeightNet(torch.nn.Module):
    def forward(self, t: torch.Tensor, f: torch.Tensor):
        return mmops.ca_weight(t * 2.0, f).sin() + ca_weight(f, t)


class _MapNet(torch.nn.Module):
    # Both ops chained, no convolution: inductor's convolution backward lowering specialises H and
    # W under dynamic=True (a plain Conv2d recompiles too), so CrissCrossAttention is compiled in
    # its own test with a backend that keeps the convolutions as they are.
    def forward(self, weight: torch.Tensor, g: torch.Tensor):
        attention = ca_weight(g * 0.3, g).softmax(1)
        return mmops.ca_map(weight.softmax(1), g) + ca_map(attention, g), ca_map(weight, g * 0.5)


def _message(op, text):
    return f"mmops::{op}: .*{text}"


def _weight_helpers(sample):
    t, f = sample.args
    return [(torch.ops.mmops._ca_weight_backward, (torch.randn_like(ca_weight(t, f)), t, f))]


def _map_helpers(sample):
    weight, g = sample.args
    return [(torch.ops.mmops._ca_map_backward, (torch.randn_like(g), weight, g))]


def _tol(dtype, what, expected, sample):
    # sums of H + W - 1 (ca_map) or C (ca_weight) products, in float; 16-bit: the output rounding
    return TOL[dtype] if dtype in (torch.float32, torch.float64) else dict(rtol=2e-2, atol=2e-2)


def _cuda_weight_samples(dtype):
    # tiles of the CUDA kernels: 32 x, 8 rows, 16 / 32 source rows, 64 row entries, 32-channel chunks
    yield _weight_sample("cpu", dtype, 0)
    for n, c, h, w, seed in [(2, 70, 37, 70, 1), (1, 5, 1, 9, 2), (2, 3, 17, 1, 3), (1, 33, 9, 65, 4)]:
        yield Sample((randn(n, c, h, w, seed=seed, dtype=dtype), randn(n, c, h, w, seed=seed + 50, dtype=dtype)))


def _cuda_map_samples(dtype):
    yield _map_sample("cpu", dtype, 0)
    for n, c, h, w, seed in [(2, 70, 37, 70, 5), (1, 5, 1, 9, 6), (2, 40, 17, 1, 7), (1, 33, 9, 65, 8)]:
        weight = randn(n, h + w - 1, h, w, seed=seed).softmax(1).to(dtype)
        yield Sample((weight, randn(n, c, h, w, seed=seed + 50, dtype=dtype)))


CONFORMANCE = [
    ConformanceCase(
        "ca_weight",
        ca_weight,
        _weight_sample,
        grad_args=(0, 1),
        feature_args=(0, 1),
        nonzero_grads=True,
        empty=_weight_empty,
        module=_WeightNet,
        helpers=_weight_helpers,
        cuda_samples=_cuda_weight_samples,
        cuda_tol=_tol,
        bad_inputs={
            "t_3d": BadInput(lambda t, f: (t[0], f), _message("ca_weight", "expected t to be a 4-D tensor"), meta=True),
            "int_t": BadInput(lambda t, f: (t.int(), f.int()), _message("ca_weight", "floating point"), meta=True),
            "f_dtype": BadInput(lambda t, f: (t, f.double()), _message("ca_weight", "f to have the dtype"), meta=True),
            "f_3d": BadInput(lambda t, f: (t, f[0]), _message("ca_weight", "f to be a 4-D"), meta=True),
            "f_shape": BadInput(
                lambda t, f: (t, f[:, :, 1:]), _message("ca_weight", "expected f of the shape"), meta=True
            ),
            "no_map": BadInput(
                lambda t, f: (t[:, :, :0, :0], f[:, :, :0, :0]), _message("ca_weight", "H \\+ W >= 1"), meta=True
            ),
            "f_device": BadInput(lambda t, f: (t, f.cuda()), _message("ca_weight", "f on the device"), cuda=True),
        },
    ),
    ConformanceCase(
        "ca_map",
        ca_map,
        _map_sample,
        grad_args=(0, 1),
        feature_args=(0, 1),
        nonzero_grads=True,
        empty=_map_empty,
        module=_MapNet,
        helpers=_map_helpers,
        cuda_samples=_cuda_map_samples,
        cuda_tol=_tol,
        bad_inputs={
            "weight_3d": BadInput(lambda w, g: (w[0], g), _message("ca_map", "weight to be a 4-D"), meta=True),
            "int_weight": BadInput(lambda w, g: (w.int(), g.int()), _message("ca_map", "floating point"), meta=True),
            "g_dtype": BadInput(lambda w, g: (w, g.double()), _message("ca_map", "g to have the dtype"), meta=True),
            "g_3d": BadInput(lambda w, g: (w, g[0]), _message("ca_map", "g to be a 4-D"), meta=True),
            "entries": BadInput(lambda w, g: (w[:, 1:], g), _message("ca_map", "expected weight of shape"), meta=True),
            "g_size": BadInput(lambda w, g: (w, g[..., 1:]), _message("ca_map", "expected weight of shape"), meta=True),
            "g_batch": BadInput(lambda w, g: (w, g[1:]), _message("ca_map", "of g of shape"), meta=True),
            "g_device": BadInput(lambda w, g: (w, g.cuda()), _message("ca_map", "g on the device"), cuda=True),
        },
    ),
]


class TestCcAttentionConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- references


def grads_of(op, a, b, go):
    a, b = a.detach().requires_grad_(True), b.detach().requires_grad_(True)
    out = op(a, b)
    return (out, *torch.autograd.grad(out, (a, b), go))


def ref_grads_of(ref, a, b, go):
    a, b = a.detach().double().requires_grad_(True), b.detach().double().requires_grad_(True)
    out = ref(a, b)
    return (out.detach(), *torch.autograd.grad(out, (a, b), go.double()))


# (N, C, H, W): square and not, a single row / column, one pixel, more channels than pixels
SHAPES = [(2, 3, 4, 5), (1, 6, 7, 3), (3, 2, 1, 6), (2, 4, 6, 1), (1, 5, 1, 1), (1, 9, 3, 3)]


def _tols(dtype):
    if dtype == torch.float64:
        return dict(rtol=1e-12, atol=1e-12)
    if dtype == torch.float32:
        return dict(rtol=1e-5, atol=1e-5)
    return dict(rtol=2e-2, atol=3e-2)  # 16-bit inputs and outputs, float sums


def _rounded(x, dtype):
    return x.to(dtype).double()


@pytest.mark.parametrize("dtype", DTYPES)
def test_ca_weight_matches_reference(dtype):
    for n, c, h, w in SHAPES:
        t, f = randn(n, c, h, w, seed=1, dtype=dtype), randn(n, c, h, w, seed=2, dtype=dtype)
        go = randn(n, h + w - 1, h, w, seed=3, dtype=dtype)
        out, gt, gf = grads_of(ca_weight, t, f, go)
        exp, gt_exp, gf_exp = ref_grads_of(ca_weight_ref, t, f, go)
        assert out.dtype == dtype and out.shape == (n, h + w - 1, h, w)
        torch.testing.assert_close(out.double(), exp, **_tols(dtype))
        torch.testing.assert_close(gt.double(), gt_exp, **_tols(dtype))
        torch.testing.assert_close(gf.double(), gf_exp, **_tols(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ca_map_matches_reference(dtype):
    for n, c, h, w in SHAPES:
        weight = randn(n, h + w - 1, h, w, seed=4).softmax(1).to(dtype)
        g, go = randn(n, c, h, w, seed=5, dtype=dtype), randn(n, c, h, w, seed=6, dtype=dtype)
        out, gw, gg = grads_of(ca_map, weight, g, go)
        exp, gw_exp, gg_exp = ref_grads_of(ca_map_ref, weight, g, go)
        assert out.dtype == dtype and out.shape == (n, c, h, w)
        torch.testing.assert_close(out.double(), exp, **_tols(dtype))
        torch.testing.assert_close(gw.double(), gw_exp, **_tols(dtype))
        torch.testing.assert_close(gg.double(), gg_exp, **_tols(dtype))


def test_references_match_the_loops():
    for n, c, h, w in SHAPES[:4]:
        t, f = randn(n, c, h, w, seed=7), randn(n, c, h, w, seed=8)
        torch.testing.assert_close(ca_weight_ref(t, f), ca_weight_loops(t, f), rtol=1e-13, atol=1e-13)
        weight = randn(n, h + w - 1, h, w, seed=9)
        torch.testing.assert_close(ca_map_ref(weight, f), ca_map_loops(weight, f), rtol=1e-13, atol=1e-13)


def test_entry_order_known_vector():
    # one channel, t = 1, f = the pixel's label 10 y + x: entry k holds the label of criss-cross pixel k
    h, w = 3, 2
    t = torch.ones(1, 1, h, w, dtype=torch.float64)
    f = torch.tensor([[0.0, 1.0], [10.0, 11.0], [20.0, 21.0]], dtype=torch.float64).view(1, 1, h, w)
    out = ca_weight(t, f)[0]
    # pixel (1, 0): row (1, 0), (1, 1); column rows 0 and 2 of x = 0
    assert out[:, 1, 0].tolist() == [10.0, 11.0, 0.0, 20.0]
    # pixel (0, 1): row (0, 0), (0, 1); column rows 1, 2 of x = 1
    assert out[:, 0, 1].tolist() == [0.0, 1.0, 11.0, 21.0]
    # pixel (2, 1): row (2, 0), (2, 1); column rows 0, 1
    assert out[:, 2, 1].tolist() == [20.0, 21.0, 1.0, 11.0]
    # ca_map with a one-hot weight picks that pixel's label
    for k in range(h + w - 1):
        weight = torch.zeros(1, h + w - 1, h, w, dtype=torch.float64)
        weight[:, k] = 1
        torch.testing.assert_close(ca_map(weight, f)[0, 0], out[k], rtol=0, atol=0)


def test_ca_map_of_ca_weight_is_attention():
    # uniform weights average the criss-cross (the pixel itself once)
    g = randn(2, 3, 4, 5, seed=10)
    weight = torch.full((2, 8, 4, 5), 1.0 / 8, dtype=torch.float64)
    expected = (g.sum(3, keepdim=True) + g.sum(2, keepdim=True) - g) / 8
    torch.testing.assert_close(ca_map(weight, g), expected, rtol=1e-13, atol=1e-13)


def test_gradcheck():
    t, f = randn(2, 3, 4, 5, seed=11).requires_grad_(True), randn(2, 3, 4, 5, seed=12).requires_grad_(True)
    assert torch.autograd.gradcheck(ca_weight, (t, f))
    weight = randn(1, 6, 3, 4, seed=13).requires_grad_(True)
    g = randn(1, 2, 3, 4, seed=14).requires_grad_(True)
    assert torch.autograd.gradcheck(ca_map, (weight, g))
    # a single row and a single column
    assert torch.autograd.gradcheck(
        ca_weight, (t[:, :, :1].detach().requires_grad_(), f[:, :, :1].detach().requires_grad_())
    )
    assert torch.autograd.gradcheck(
        ca_map, (randn(1, 4, 4, 1, seed=15).requires_grad_(), randn(1, 2, 4, 1, seed=16).requires_grad_())
    )


def test_backward_helpers_match_the_reference_gradients():
    t, f = randn(2, 3, 5, 4, seed=17), randn(2, 3, 5, 4, seed=18)
    go = randn(2, 8, 5, 4, seed=19)
    _, gt_exp, gf_exp = ref_grads_of(ca_weight_ref, t, f, go)
    gt, gf = torch.ops.mmops._ca_weight_backward(go, t, f)
    torch.testing.assert_close(gt, gt_exp, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gf, gf_exp, rtol=1e-12, atol=1e-12)
    weight, gout = randn(2, 8, 5, 4, seed=20), randn(2, 3, 5, 4, seed=21)
    _, gw_exp, gg_exp = ref_grads_of(ca_map_ref, weight, t, gout)
    gw, gg = torch.ops.mmops._ca_map_backward(gout, weight, t)
    torch.testing.assert_close(gw, gw_exp, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gg, gg_exp, rtol=1e-12, atol=1e-12)


def test_strided_inputs():
    t = randn(2, 6, 4, 10, seed=22)[:, ::2, :, ::2]
    f = randn(2, 3, 4, 5, seed=23).contiguous(memory_format=torch.channels_last)
    assert not t.is_contiguous()
    torch.testing.assert_close(ca_weight(t, f), ca_weight(t.contiguous(), f.contiguous()), rtol=0, atol=0)
    weight = randn(2, 16, 4, 5, seed=24)[:, ::2]
    torch.testing.assert_close(ca_map(weight, t), ca_map(weight.contiguous(), t.contiguous()), rtol=0, atol=0)


def test_autocast_runs_in_float32():
    t, f = randn(1, 4, 3, 5, seed=25, dtype=torch.bfloat16), randn(1, 4, 3, 5, seed=26)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ca_weight(t, f.float())  # mixed dtypes: both run in float32
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, ca_weight(t.float(), f.float()).bfloat16(), rtol=0, atol=0)


def test_double_backward_refused():
    t = randn(1, 2, 3, 3, seed=27).requires_grad_(True)
    go = randn(1, 5, 3, 3, seed=28).requires_grad_(True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(ca_weight(t, t * 2), t, go, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(ca_map(go, t), t, randn(1, 2, 3, 3, seed=29).requires_grad_(True), create_graph=True)


def test_backward_helper_checks():
    t = torch.randn(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match="mmops::ca_weight: expected grad_weight of shape \\[1, 6, 3, 4\\]"):
        torch.ops.mmops._ca_weight_backward(torch.randn(1, 7, 3, 4), t, t)
    with pytest.raises(RuntimeError, match="mmops::ca_map: expected grad_out of the shape of g"):
        torch.ops.mmops._ca_map_backward(torch.randn(1, 3, 3, 4), torch.randn(1, 6, 3, 4), t)
    with pytest.raises(RuntimeError, match="mmops::ca_map: expected grad_out to have the dtype of g"):
        torch.ops.mmops._ca_map_backward(t.double(), torch.randn(1, 6, 3, 4), t)


def test_huge_map_gives_our_error():
    # N * (H + W - 1) * H * W overflows int64 on sizes alone (meta)
    t = torch.empty(8, 1, 2**20, 2**20, device="meta")
    with pytest.raises(RuntimeError, match="mmops::ca_weight: .*element count"):
        ca_weight(t, t)


# --------------------------------------------------------------------------- the module


def _module(c, seed=0, gamma=0.5):
    torch.manual_seed(seed)
    module = mmops.CrissCrossAttention(c)
    with torch.no_grad():
        module.gamma.scale.fill_(gamma)
    return module


def test_module_matches_mmcv2_math():
    for n, c, h, w in [(2, 16, 5, 7), (1, 8, 6, 6), (1, 24, 1, 4)]:
        module = _module(c, seed=c).double()
        x = randn(n, c, h, w, seed=30)
        expected = criss_cross_attention_mmcv2(x, module.state_dict())
        torch.testing.assert_close(module(x), expected, rtol=1e-12, atol=1e-12)
        # float32 module, same weights
        torch.testing.assert_close(module.float()(x.float()).double(), expected, rtol=1e-4, atol=1e-4)


def test_module_gradients_match_mmcv2_math():
    module = _module(16, seed=1).double()
    x = randn(2, 16, 4, 5, seed=31).requires_grad_(True)
    params = dict(module.named_parameters())
    out = module(x)
    go = randn(*out.shape, seed=32)
    grads = torch.autograd.grad(out, [x, *params.values()], go)
    ref_out = criss_cross_attention_mmcv2(x, params)
    ref_grads = torch.autograd.grad(ref_out, [x, *params.values()], go)
    for name, g, r in zip(["x", *params], grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-10, msg=name)


def test_module_compiles_once_for_all_sizes():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    module = _module(16, seed=2).double()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(module, backend=counter, fullgraph=True, dynamic=True)
    for n, h, w in [(2, 4, 6), (3, 7, 5)]:
        x = randn(n, 16, h, w, seed=h).requires_grad_(True)
        out = compiled(x)
        go = randn(*out.shape, seed=w)
        (grad,) = torch.autograd.grad(out, [x], go)
        expected = module(x)
        (expected_grad,) = torch.autograd.grad(expected, [x], go)
        torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(grad, expected_grad, rtol=1e-12, atol=1e-12)
    assert counter.frame_count == 1


def test_module_state_dict_repr_and_gamma_zero():
    module = mmops.CrissCrossAttention(16)
    names = [f"{conv}_conv.{p}" for conv in ("query", "key", "value") for p in ("weight", "bias")]
    assert sorted(module.state_dict()) == sorted(names + ["gamma.scale"])
    assert module.query_conv.out_channels == 2 and module.value_conv.out_channels == 16
    assert repr(module) == "CrissCrossAttention(in_channels=16)"
    x = torch.randn(1, 16, 5, 6)
    torch.testing.assert_close(module(x), x, rtol=0, atol=0)  # gamma starts at 0 (mmcv's test)
    with pytest.raises(ValueError, match="in_channels must be >= 8"):
        mmops.CrissCrossAttention(4)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_float64(dtype):
    """CUDA in every dtype against the float64 CPU result of the same (rounded) values."""
    for n, c, h, w in [(2, 70, 37, 70), (1, 64, 97, 97), (3, 8, 33, 1), (1, 40, 1, 33), (2, 33, 9, 65)]:
        t, f = randn(n, c, h, w, seed=40, dtype=dtype), randn(n, c, h, w, seed=41, dtype=dtype)
        go = randn(n, h + w - 1, h, w, seed=42, dtype=dtype)
        out, gt, gf = grads_of(ca_weight, t.cuda(), f.cuda(), go.cuda())
        exp, gt_exp, gf_exp = grads_of(ca_weight, t.double(), f.double(), go.double())
        scale = c**0.5  # sums of c products
        tol = _tols(dtype) if dtype in (torch.float32, torch.float64) else dict(rtol=2e-2, atol=2e-2 * scale)
        if dtype == torch.float32:  # float sums of up to max(c, h + w - 1) terms: rounding grows like its root
            tol = dict(rtol=1e-5, atol=1e-5 * max(1.0, (max(c, h + w - 1) / 16) ** 0.5))
        torch.testing.assert_close(out.cpu().double(), exp, **tol)
        torch.testing.assert_close(gt.cpu().double(), gt_exp, **tol)
        torch.testing.assert_close(gf.cpu().double(), gf_exp, **tol)
        weight = randn(n, h + w - 1, h, w, seed=43).softmax(1).to(dtype)
        gout = randn(n, c, h, w, seed=44, dtype=dtype)
        out, gw, gg = grads_of(ca_map, weight.cuda(), f.cuda(), gout.cuda())
        exp, gw_exp, gg_exp = grads_of(ca_map, weight.double(), f.double(), gout.double())
        torch.testing.assert_close(out.cpu().double(), exp, **tol)
        torch.testing.assert_close(gw.cpu().double(), gw_exp, **tol)
        torch.testing.assert_close(gg.cpu().double(), gg_exp, **tol)


@pytest.mark.cuda
def test_cuda_module_matches_mmcv2_math():
    module = _module(64, seed=2).double()
    x = randn(2, 64, 33, 45, seed=45)
    expected = criss_cross_attention_mmcv2(x, module.state_dict())
    torch.testing.assert_close(module.cuda()(x.cuda()).cpu(), expected, rtol=1e-10, atol=1e-10)


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge_module():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    from mmops.mmcv_ops import _routes

    assert "mmcv.ops.cc_attention.CrissCrossAttention.forward" in mmops.mmcv_ops.routed_ops()
    assert ops.CrissCrossAttention.forward is _routes.cc_attention_forward
    torch.manual_seed(3)
    theirs = ops.CrissCrossAttention(16).double()
    with torch.no_grad():
        theirs.gamma.scale.fill_(0.8)
    ours = mmops.CrissCrossAttention(16).double()
    ours.load_state_dict(theirs.state_dict())  # the same parameter names
    x = randn(2, 16, 5, 7, seed=46)
    routed = theirs(x)
    mmops.mmcv_ops.uninstall()  # mmcv's own plain-torch forward
    try:
        original = theirs(x)
    finally:
        mmops.mmcv_ops.install()
    torch.testing.assert_close(routed, original, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours(x), original, rtol=1e-12, atol=1e-12)
    assert repr(theirs) == "CrissCrossAttention(in_channels=16)"
