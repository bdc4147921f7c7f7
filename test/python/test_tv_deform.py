"""mmops.tv's deform_conv2d and DeformConv2d: the assertions of torchvision's TestDeformConv
(its geometry: 6 -> 2 channels, weight groups 2, offset groups 3, kernel 3 x 2, stride
(2, 1), padding (1, 0), dilation (2, 1)) against the float64 reference of
test_deform_conv.py, then mmops.tv == torchvision when it is installed."""

import pytest
import torch
from conformance import full_float32_precision
from conftest import requires_torchvision
from test_deform_conv import reference
from torch.autograd import gradcheck

from mmops import tv

STRIDE, PAD, DIL = (2, 1), (1, 0), (2, 1)
IN_C, OUT_C, KERNEL, GROUPS, OFFSET_GROUPS = 6, 2, (3, 2), 2, 3


def _out_hw(h, w):
    sizes = [(size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, s, p, d in zip((h, w), KERNEL, STRIDE, PAD, DIL)]
    return sizes[0], sizes[1]


def fn_args(batch, contiguous=True, dtype=torch.float64, seed=0):
    """x, weight, offset, mask, bias (torchvision's shapes and layouts), all requiring grad."""
    g = torch.Generator().manual_seed(seed)
    ho, wo = _out_hw(5, 4)
    taps = KERNEL[0] * KERNEL[1]
    x = torch.rand(batch, IN_C, 5, 4, generator=g, dtype=dtype)
    offset = torch.randn(batch, OFFSET_GROUPS * 2 * taps, ho, wo, generator=g, dtype=dtype)
    mask = torch.randn(batch, OFFSET_GROUPS * taps, ho, wo, generator=g, dtype=dtype)
    weight = torch.randn(OUT_C, IN_C // GROUPS, *KERNEL, generator=g, dtype=dtype)
    bias = torch.randn(OUT_C, generator=g, dtype=dtype)
    if not contiguous:
        x = x.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2)
        offset = offset.permute(1, 3, 0, 2).contiguous().permute(2, 0, 3, 1)
        mask = mask.permute(1, 3, 0, 2).contiguous().permute(2, 0, 3, 1)
        weight = weight.permute(3, 2, 0, 1).contiguous().permute(2, 3, 1, 0)
    return [t.requires_grad_(True) for t in (x, weight, offset, mask, bias)]


def expected(x, weight, offset, mask, bias):
    geometry = dict(stride=STRIDE, padding=PAD, dilation=DIL, groups=GROUPS, deform_groups=OFFSET_GROUPS)
    return reference(x.detach(), offset.detach(), mask, weight.detach(), bias.detach(), **geometry)


def make_layer(bias=True):
    return tv.DeformConv2d(IN_C, OUT_C, KERNEL, stride=STRIDE, padding=PAD, dilation=DIL, groups=GROUPS, bias=bias)


@pytest.mark.parametrize("batch", [0, 5])
@pytest.mark.parametrize("contiguous", [True, False])
def test_forward(contiguous, batch):
    x, _, offset, mask, _ = fn_args(batch, contiguous)
    layer = make_layer().double()
    ref_args = (x, layer.weight, offset)
    torch.testing.assert_close(
        layer(x, offset, mask), expected(*ref_args, mask.detach(), layer.bias), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(layer(x, offset), expected(*ref_args, None, layer.bias), rtol=1e-5, atol=1e-5)


def test_wrong_sizes():
    x, _, offset, mask, _ = fn_args(10)
    layer = make_layer().double()
    with pytest.raises(RuntimeError, match="offset"):
        layer(x, torch.rand_like(offset[:, :2]))
    with pytest.raises(RuntimeError, match="mask"):
        layer(x, offset, torch.rand_like(mask[:, :2]))
    with pytest.raises(RuntimeError, match="4-D"):
        tv.deform_conv2d(x, offset, layer.weight[0])
    with pytest.raises(RuntimeError, match="groups"):
        tv.deform_conv2d(x, offset, layer.weight[:, :0])


@pytest.mark.parametrize("batch", [0, 3])
@pytest.mark.parametrize("contiguous", [True, False])
def test_backward_gradcheck(contiguous, batch):
    x, weight, offset, mask, bias = fn_args(batch, contiguous)
    geometry = dict(stride=STRIDE, padding=PAD, dilation=DIL)

    def with_mask(x_, offset_, mask_, weight_, bias_):
        return tv.deform_conv2d(x_, offset_, weight_, bias_, mask=mask_, **geometry)

    def without_mask(x_, offset_, weight_, bias_):
        return tv.deform_conv2d(x_, offset_, weight_, bias_, mask=None, **geometry)

    gradcheck(with_mask, (x, offset, mask, weight, bias), nondet_tol=1e-5, fast_mode=True)
    gradcheck(without_mask, (x, offset, weight, bias), nondet_tol=1e-5, fast_mode=True)
    scripted = torch.jit.script(tv.deform_conv2d)
    gradcheck(
        lambda *t: scripted(t[0], t[1], t[3], t[4], STRIDE, PAD, DIL, t[2]),
        (x, offset, mask, weight, bias),
        nondet_tol=1e-5,
        fast_mode=True,
    )


def test_scriptable_module_and_repr():
    layer = tv.DeformConv2d(in_channels=8, out_channels=8, kernel_size=3)
    scripted = torch.jit.script(layer)
    x = torch.rand(1, 8, 6, 6)
    offset = torch.randn(1, 18, 4, 4)
    torch.testing.assert_close(scripted(x, offset), layer(x, offset))
    assert repr(layer) == "DeformConv2d(8, 8, kernel_size=(3, 3), stride=(1, 1))"
    full = (
        "DeformConv2d(6, 2, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 1), groups=2, bias=False)"
    )
    assert repr(make_layer(bias=False)) == full
    with pytest.raises(ValueError, match="groups"):
        tv.DeformConv2d(5, 2, 3, groups=2)


def test_compile_deform_conv2d():
    x, weight, offset, mask, bias = [t.detach().float() for t in fn_args(2)]

    def fn(x, offset, mask):
        return tv.deform_conv2d(x, offset, weight, bias, STRIDE, PAD, DIL, mask)

    compiled = torch.compile(fn, fullgraph=True)
    torch.testing.assert_close(compiled(x, offset, mask), fn(x, offset, mask))


@requires_torchvision
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_equals_torchvision(with_bias, masked):
    from torchvision import ops

    x, weight, offset, mask, bias = fn_args(4, seed=3)
    bias = bias if with_bias else None
    mask = mask if masked else None
    tensors = [t for t in (x, offset, weight, bias, mask) if t is not None]
    outs = []
    for fn in (tv.deform_conv2d, ops.deform_conv2d):
        for t in tensors:
            t.grad = None
        out = fn(x, offset, weight, bias, STRIDE, PAD, DIL, mask)
        out.backward(torch.ones_like(out))
        outs.append([out.detach()] + [t.grad.clone() for t in tensors])
    for got, exp in zip(*outs):
        torch.testing.assert_close(got, exp, rtol=1e-10, atol=1e-10)


@requires_torchvision
def test_module_initialisation_equals_torchvision():
    from torchvision import ops

    torch.manual_seed(0)
    ours = make_layer()
    torch.manual_seed(0)
    theirs = ops.DeformConv2d(IN_C, OUT_C, KERNEL, stride=STRIDE, padding=PAD, dilation=DIL, groups=GROUPS)
    assert repr(ours) == repr(theirs)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    for k, v in ours.state_dict().items():
        torch.testing.assert_close(v, theirs.state_dict()[k], rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("contiguous", [True, False])
def test_cuda_grads_equal_cpu(contiguous):
    """torchvision's CPU == CUDA weight-gradient test, at a smaller size."""
    torch.manual_seed(0)
    init_weight = torch.randn(9, 9, 3, 3, requires_grad=True)
    img = torch.randn(4, 9, 100, 31)
    offset = torch.rand(4, 2 * 3 * 3, 100, 31)
    mask = torch.rand(4, 3 * 3, 100, 31)
    weight = init_weight
    if not contiguous:
        img = img.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2)
        offset = offset.permute(1, 3, 0, 2).contiguous().permute(2, 0, 3, 1)
        mask = mask.permute(1, 3, 0, 2).contiguous().permute(2, 0, 3, 1)
        weight = init_weight.permute(3, 2, 0, 1).contiguous().permute(2, 3, 1, 0)
    grads = []
    for device in ("cpu", "cuda"):
        init_weight.grad = None
        with full_float32_precision():  # torchvision's products are full float32
            out = tv.deform_conv2d(
                img.to(device), offset.to(device), weight.to(device), padding=1, mask=mask.to(device)
            )
            out.mean().backward()
        grads.append(init_weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("batch", [0, 5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cuda_autocast(dtype, batch):
    # inputs rounded to dtype first: the reference sees exactly what the op sees
    x, _, offset, mask, _ = [t.detach().to(dtype).double() for t in fn_args(batch, contiguous=False)]
    layer = make_layer().to(dtype).double()
    exp = expected(x, layer.weight, offset, mask, layer.bias)
    layer = layer.cuda().to(dtype)
    with torch.autocast("cuda"), full_float32_precision():
        out = layer(x.cuda().to(dtype), offset.cuda().to(dtype), mask.cuda().to(dtype))
    assert out.dtype == dtype
    tol = 2e-3 if dtype == torch.float16 else 1e-5
    torch.testing.assert_close(out.double().cpu(), exp, rtol=tol, atol=tol)


def test_torch_fx_trace_is_one_call():
    layer = make_layer().double()
    graph_module = torch.fx.symbolic_trace(layer)
    calls = [n for n in graph_module.graph.nodes if n.op == "call_function"]
    assert len(calls) == 1
    x, _, offset, mask, _ = [t.detach() for t in fn_args(2)]
    torch.testing.assert_close(graph_module(x, offset, mask), layer(x, offset, mask))
