"""Tests of mmops::deform_conv2d (DCNv1) and mmops::modulated_deform_conv2d (DCNv2): the
conformance cases, then an independent float64 reference (grid_sample per tap + einsum),
known vectors, gradcheck, torchvision, special inputs (NaN offsets, layouts, chunks), the
modules and the CUDA-specific tests."""

import math
import os

import pytest
import torch
import torch.nn.functional as F
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, deterministic_algorithms, requires_torchvision

import mmops

v1 = torch.ops.mmops.deform_conv2d
v2 = torch.ops.mmops.modulated_deform_conv2d
backward_op = torch.ops.mmops._deform_conv2d_backward


# --------------------------------------------------------------------------- reference


def out_size(size, k, s, p, d):
    return (size + 2 * p - (d * (k - 1) + 1)) // s + 1


def reference(x, offset, mask, weight, bias, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, deform_groups=1):
    """Deformable convolution in plain PyTorch, float64 (differentiable w.r.t. every
    tensor): for each deform group and tap, F.grid_sample (bilinear, zeros,
    align_corners=False) of the group's channels at the shifted pixel positions,
    times the mask; then the convolution as an einsum with the weight."""
    x, offset, weight = x.double(), offset.double(), weight.double()
    n, c, h, w = x.shape
    c_out, _, kh, kw = weight.shape
    ho = out_size(h, kh, stride[0], padding[0], dilation[0])
    wo = out_size(w, kw, stride[1], padding[1], dilation[1])
    taps = kh * kw
    per_dg = c // deform_groups
    off = offset.view(n, deform_groups, taps, 2, ho, wo)
    base_y = (torch.arange(ho, dtype=torch.float64) * stride[0] - padding[0]).view(1, ho, 1)
    base_x = (torch.arange(wo, dtype=torch.float64) * stride[1] - padding[1]).view(1, 1, wo)
    per_tap = []
    for k in range(taps):
        i, j = divmod(k, kw)
        groups_k = []
        for g in range(deform_groups):
            y = base_y + i * dilation[0] + off[:, g, k, 0]
            xx = base_x + j * dilation[1] + off[:, g, k, 1]
            # pixel coordinate -> grid_sample's normalised coordinate (align_corners=False)
            grid = torch.stack([(2 * xx + 1) / w - 1, (2 * y + 1) / h - 1], dim=-1)
            s = F.grid_sample(
                x[:, g * per_dg : (g + 1) * per_dg], grid, mode="bilinear", padding_mode="zeros", align_corners=False
            )
            if mask is not None:
                s = s * mask.double()[:, g * taps + k].unsqueeze(1)
            groups_k.append(s)
        per_tap.append(torch.cat(groups_k, dim=1))  # [N, C, Ho, Wo]
    cols = torch.stack(per_tap, dim=2).view(n, groups, c // groups, taps, ho, wo)
    wv = weight.view(groups, c_out // groups, c // groups, taps)
    out = torch.einsum("ngckhw,gock->ngohw", cols, wv).reshape(n, c_out, ho, wo)
    if bias is not None:
        out = out + bias.double().view(1, -1, 1, 1)
    return out


def make_inputs(
    n,
    c,
    h,
    w,
    c_out,
    k,
    stride=1,
    padding=0,
    dilation=1,
    groups=1,
    deform_groups=1,
    dtype=torch.float64,
    spread=2.0,
    seed=0,
    with_bias=True,
):
    """Random inputs; offsets spread a few pixels (some samples fall outside the map)."""
    g = torch.Generator().manual_seed(seed)
    kh, kw = (k, k) if isinstance(k, int) else k
    s = (stride, stride) if isinstance(stride, int) else stride
    p = (padding, padding) if isinstance(padding, int) else padding
    d = (dilation, dilation) if isinstance(dilation, int) else dilation
    ho, wo = out_size(h, kh, s[0], p[0], d[0]), out_size(w, kw, s[1], p[1], d[1])
    x = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    offset = torch.randn(n, 2 * deform_groups * kh * kw, ho, wo, generator=g, dtype=torch.float64) * spread
    mask = torch.rand(n, deform_groups * kh * kw, ho, wo, generator=g, dtype=torch.float64)
    weight = torch.randn(c_out, c // groups, kh, kw, generator=g, dtype=torch.float64) / math.sqrt(c * kh * kw)
    bias = torch.randn(c_out, generator=g, dtype=torch.float64) if with_bias else None
    cast = [t.to(dtype) if t is not None else None for t in (x, offset, mask, weight, bias)]
    return cast, dict(stride=s, padding=p, dilation=d, groups=groups, deform_groups=deform_groups)


def call(x, offset, mask, weight, bias, stride, padding, dilation, groups, deform_groups):
    args = (list(stride), list(padding), list(dilation), groups, deform_groups)
    if mask is None:
        return v1(x, offset, weight, bias, *args)
    return v2(x, offset, mask, weight, bias, *args)


def value_and_grads(fn, tensors, grad_out_seed=1):
    """fn(*tensors) and the gradients of sum(out * random) w.r.t. every tensor that is not None."""
    leaves = [t.detach().clone().requires_grad_(True) if t is not None else None for t in tensors]
    out = fn(*leaves)
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_out_seed), dtype=torch.float64)
    present = [t for t in leaves if t is not None]
    grads = torch.autograd.grad(out, present, go.to(device=out.device, dtype=out.dtype))
    return out, grads


# (n, c, h, w, c_out, k, stride, padding, dilation, groups, deform_groups)
CASES = [
    (2, 4, 7, 8, 6, 3, 1, 1, 1, 1, 1),
    (1, 6, 9, 7, 4, (2, 3), (2, 1), (1, 2), (1, 2), 2, 3),
    (2, 8, 10, 9, 8, 3, 2, 2, 2, 4, 2),
    (3, 3, 5, 6, 5, 1, 1, 0, 1, 1, 3),
    (1, 4, 6, 6, 2, (3, 1), 1, (2, 0), (2, 1), 2, 4),
    (2, 12, 5, 5, 6, 5, 1, 2, 1, 3, 2),
]


# --------------------------------------------------------------------------- conformance

P1, P0 = [1, 1], [0, 0]


def _sample(
    modulated,
    sizes,
    c=4,
    c_out=6,
    k=3,
    stride=1,
    padding=1,
    dilation=1,
    groups=2,
    deform_groups=2,
    with_bias=True,
    channels_last=False,
    seed=30,
):
    """sample(device, dtype, size): make_inputs with (n, h, w) = sizes[size]."""

    def sample(device, dtype, size):
        n, h, w = sizes[size]
        (x, offset, mask, weight, bias), kw = make_inputs(
            n,
            c,
            h,
            w,
            c_out,
            k,
            stride,
            padding,
            dilation,
            groups,
            deform_groups,
            dtype=dtype,
            seed=seed + size,
            with_bias=with_bias,
        )
        x, offset, mask, weight = (t.to(device) for t in (x, offset, mask, weight))
        x = x.contiguous(memory_format=torch.channels_last) if channels_last else x
        bias = None if bias is None else bias.to(device)
        options = (list(kw["stride"]), list(kw["padding"]), list(kw["dilation"]), groups, deform_groups)
        return Sample((x, offset, mask, weight, bias, *options) if modulated else (x, offset, weight, bias, *options))

    return sample


def _empty(modulated):
    def empty(device, dtype):
        (x, offset, mask, weight, bias), kw = make_inputs(0, 4, 6, 7, 6, 3, 1, 1, 1, 2, 2, dtype=dtype)
        samples = [((x, offset, mask, weight, bias, P1, P1, P1, 2, 2), (0, 6, 6, 7))]  # empty batch
        (x, offset, mask, _, _), _ = make_inputs(2, 4, 5, 5, 4, 3, padding=1, dtype=dtype)
        samples.append(
            ((x, offset, mask, torch.randn(0, 4, 3, 3, dtype=dtype), None, P1, P1, P1, 1, 1), (2, 0, 5, 5))
        )  # no output channels
        to = lambda t: t if t is None or not isinstance(t, torch.Tensor) else t.to(device)  # noqa: E731
        return [
            Sample(tuple(to(a) for a in (args if modulated else args[:2] + args[3:])), out_shapes=[shape])
            for args, shape in samples
        ]

    return empty


def _cuda_samples(modulated):
    def samples(dtype):
        for i, (n, c, h, w, c_out, k, s, p, d, g, dg) in enumerate(CUDA_CASES):
            (x, offset, mask, weight, bias), kw = make_inputs(
                n, c, h, w, c_out, k, s, p, d, g, dg, dtype=dtype, seed=40 + i
            )
            options = (list(kw["stride"]), list(kw["padding"]), list(kw["dilation"]), g, dg)
            tensors = (x, offset, mask, weight, bias) if modulated else (x, offset, weight, bias)
            yield Sample((*tensors, *options))

    return samples


def _cuda_tol(dtype, what, expected, sample):
    tol = _cuda_tolerance(dtype, expected)
    if what.startswith("grad") and dtype in (torch.float16, torch.bfloat16):
        tol = dict(atol=tol["atol"] * 2, rtol=tol["rtol"] * 2)
    return tol


def _helpers(sample):
    x, o, m, w, b, stride, padding, dilation, groups, dg = sample.args
    go = torch.randn_like(v2(*sample.args))
    return [
        (backward_op, (go, x, o, m, w, stride, padding, dilation, groups, dg, [True] * 5)),
        (backward_op, (go, x, o, None, w, stride, padding, dilation, groups, dg, [False, True, True, False, True])),
    ]


class _Net(torch.nn.Module):
    """Deformable convolutions in a model: the ops on computed inputs, the functional wrapper
    and ModulatedDeformConv2d (4 input channels, 2 deform groups, stride 1, padding 1)."""

    def __init__(self):
        super().__init__()
        self.plain = mmops.ModulatedDeformConv2d(4, 4, 3, padding=1, deform_groups=2, bias=False)

    def forward(
        self, x: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
    ):
        a = torch.ops.mmops.modulated_deform_conv2d(
            x * 1.5, offset, mask.sigmoid(), weight, bias, [1, 1], [1, 1], [1, 1], 2, 2
        )
        if torch.jit.is_scripting():  # the functional wrapper is not scriptable
            b = torch.ops.mmops.deform_conv2d(x, offset, weight, None, [1, 1], [1, 1], [1, 1], 2, 2)
        else:
            b = mmops.deform_conv2d(x, offset, weight, None, 1, 1, 1, 2, 2)
        z = self.plain(x, offset, mask) + torch.ops.mmops.deform_conv2d(
            x, offset, self.plain.weight, None, [1, 1], [1, 1], [1, 1], 1, 2
        )
        return (a.sin() + b).sum(dim=1), z


class _PackNet(torch.nn.Module):
    """The modules in a model: DeformConv2dPack, ModulatedDeformConv2dPack (offsets from a
    convolution), ModulatedDeformConv2d and the ops (4 channels, 1 deform group). TorchScript
    only: inductor specialises the Pack modules' convolutions (no dynamic sizes)."""

    def __init__(self):
        super().__init__()
        self.dcn = mmops.DeformConv2dPack(4, 6, 3, padding=1, deform_groups=2)
        self.dcn2 = mmops.ModulatedDeformConv2dPack(6, 4, 3, stride=2, padding=1)
        self.plain = mmops.ModulatedDeformConv2d(4, 4, 3, padding=1, bias=False)
        g = torch.Generator().manual_seed(16)
        with torch.no_grad():  # offsets that move (the Pack modules start as convolutions)
            self.dcn.conv_offset.weight.copy_(torch.randn(self.dcn.conv_offset.weight.shape, generator=g) * 0.2)
            self.dcn2.conv_offset.weight.copy_(torch.randn(self.dcn2.conv_offset.weight.shape, generator=g) * 0.2)

    def forward(
        self, x: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
    ):
        y = self.dcn2(self.dcn(x).relu())
        z = self.plain(x, offset, mask) + torch.ops.mmops.deform_conv2d(
            x, offset, self.plain.weight, None, [1, 1], [1, 1], [1, 1], 1, 1
        )
        op = torch.ops.mmops.modulated_deform_conv2d(x, offset, mask, weight, bias, [1, 1], [1, 1], [1, 1], 1, 1)
        return y.sum() + z.mean(dim=1, keepdim=True), op


def _good():
    (x, offset, mask, weight, bias), _ = make_inputs(2, 4, 6, 6, 6, 3, 1, 1, 1, 2, 2, dtype=torch.float32)
    return x, offset, mask, weight, bias


# name: (make(x, offset, mask, weight, bias) -> modulated_deform_conv2d's arguments, message)
BAD = {
    "input_3d": (lambda x, o, m, w, b: (x[0], o, m, w, b, P1, P1, P1, 2, 2), "expected input to be a 4-D tensor"),
    "int_input": (
        lambda x, o, m, w, b: (x.int(), o.int(), m.int(), w.int(), None, P1, P1, P1, 2, 2),
        "expected input to have a floating point dtype",
    ),
    "offset_dtype": (
        lambda x, o, m, w, b: (x, o.double(), m, w, b, P1, P1, P1, 2, 2),
        r"expected offset to have the dtype of input \(Float\), but got Double",
    ),
    "mask_dtype": (lambda x, o, m, w, b: (x, o, m.half(), w, b, P1, P1, P1, 2, 2), "expected mask to have the dtype"),
    "weight_dtype": (
        lambda x, o, m, w, b: (x, o, m, w.double(), b, P1, P1, P1, 2, 2),
        "expected weight to have the dtype",
    ),
    "bias_dtype": (lambda x, o, m, w, b: (x, o, m, w, b.double(), P1, P1, P1, 2, 2), "expected bias to have the dtype"),
    "weight_3d": (lambda x, o, m, w, b: (x, o, m, w[0], b, P1, P1, P1, 2, 2), "expected weight to be a 4-D tensor"),
    "offset_channels": (
        lambda x, o, m, w, b: (x, o[:, :30], m, w, b, P1, P1, P1, 2, 2),
        r"expected offset of shape \[2, 36, 6, 6\] \(\[N, 2 \* deform_groups \* kh \* kw, H_out, "
        r"W_out\]\), but got \[2, 30, 6, 6\]",
    ),
    "offset_spatial": (lambda x, o, m, w, b: (x, o[:, :, :5], m, w, b, P1, P1, P1, 2, 2), "expected offset of shape"),
    "offset_3d": (lambda x, o, m, w, b: (x, o[0], m, w, b, P1, P1, P1, 2, 2), "expected offset of shape .* 3-D"),
    "mask_shape": (
        lambda x, o, m, w, b: (x, o, m[:, :9], w, b, P1, P1, P1, 2, 2),
        r"expected mask of shape \[2, 18, 6, 6\]",
    ),
    "bias_shape": (lambda x, o, m, w, b: (x, o, m, w, b[:5], P1, P1, P1, 2, 2), r"expected bias of shape \[6\]"),
    "groups_input": (
        lambda x, o, m, w, b: (x, o, m, w, b, P1, P1, P1, 3, 2),
        r"input channels \(C_in = 4\) to be divisible by groups \(3\)",
    ),
    "groups_output": (
        lambda x, o, m, w, b: (x, o, m, torch.cat([w, w[:1]]), None, P1, P1, P1, 4, 2),
        r"output channels \(weight.size\(0\) = 7\) to be divisible by groups \(4\)",
    ),
    "deform_groups": (lambda x, o, m, w, b: (x, o, m, w, b, P1, P1, P1, 2, 3), r"divisible by deform_groups \(3\)"),
    "weight_in_channels": (
        lambda x, o, m, w, b: (x, o, m, w, b, P1, P1, P1, 1, 2),
        r"expected weight of shape \[C_out, C_in / groups = 4, kh, kw\]",
    ),
    "kernel_zero": (lambda x, o, m, w, b: (x, o, m, w[:, :, :0], b, P1, P1, P1, 2, 2), "kernel size"),
    "stride_zero": (lambda x, o, m, w, b: (x, o, m, w, b, [0, 1], P1, P1, 2, 2), "stride values must be positive"),
    "stride_three": (
        lambda x, o, m, w, b: (x, o, m, w, b, [1, 1, 1], P1, P1, 2, 2),
        "expected stride to hold 2 values",
    ),
    "padding_negative": (
        lambda x, o, m, w, b: (x, o, m, w, b, P1, [-1, 1], P1, 2, 2),
        "padding values must be non-negative",
    ),
    "dilation_zero": (lambda x, o, m, w, b: (x, o, m, w, b, P1, P1, [1, 0], 2, 2), "dilation values must be positive"),
    "groups_zero": (lambda x, o, m, w, b: (x, o, m, w, b, P1, P1, P1, 0, 2), "groups must be positive"),
    "deform_groups_zero": (
        lambda x, o, m, w, b: (x, o, m, w, b, P1, P1, P1, 2, 0),
        "deform_groups must be positive",
    ),
    "too_small": (
        lambda x, o, m, w, b: (x[:, :, :1, :1], o, m, w, b, P1, P0, P1, 2, 2),
        r"expected a positive output size, but the input \(H, W\) = \(1, 1\)",
    ),
}


def _bad_inputs(modulated):
    """BAD for one of the ops (deform_conv2d: the rows without a mask, the mask dropped);
    the offset shape is checked on meta tensors too."""
    name = "modulated_deform_conv2d" if modulated else "deform_conv2d"
    drop_mask = (lambda args: args) if modulated else (lambda args: args[:2] + args[3:])
    return {
        key: BadInput(
            lambda *_, make=make: drop_mask(make(*_good())), f"mmops::{name}: .*{match}", meta=key == "offset_channels"
        )
        for key, (make, match) in BAD.items()
        if modulated or "mask" not in key
    }


_SIZES = ((5, 10, 11), (7, 12, 9))  # (n, h, w): sizes differ from every other size (one dynamo symbol each)
CONFORMANCE = [
    ConformanceCase(
        "modulated_deform_conv2d",
        v2,
        _sample(True, _SIZES),
        grad_args=(0, 1, 2, 3, 4),
        feature_args=(0,),
        empty=_empty(True),
        bad_inputs=_bad_inputs(True),
        module=_Net,
        cuda_samples=_cuda_samples(True),
        cuda_tol=_cuda_tol,
        channels_last_output=True,
    ),
    ConformanceCase(
        "modulated_deform_conv2d_modules",
        v2,
        _sample(True, ((2, 8, 8),) * 2, c_out=4, groups=1, deform_groups=1, seed=16),
        dtype=torch.float64,
        dtypes=(),
        grad_args=(0, 1, 2, 3, 4),
        module=_PackNet,
        module_tests=("torchscript",),
        script_tol=dict(rtol=0, atol=1e-12),
        script_grad_tol=dict(rtol=0, atol=1e-12),
    ),
    ConformanceCase(
        "deform_conv2d",
        v1,
        _sample(False, _SIZES, with_bias=False),
        grad_args=(0, 1, 2, 3),
        feature_args=(0,),
        empty=_empty(False),
        bad_inputs=_bad_inputs(False),
        cuda_samples=_cuda_samples(False),
        cuda_tol=_cuda_tol,
        channels_last_output=True,
    ),
    ConformanceCase(
        "modulated_deform_conv2d_strided",
        v2,
        _sample(True, ((2, 6, 5),) * 2, stride=2, seed=0),
        dtypes=(),
        grad_args=(0, 1, 2, 3, 4),
        empty=_empty(True),
        helpers=_helpers,
    ),
    ConformanceCase(
        "deform_conv2d_strided_channels_last",
        v1,
        _sample(False, ((2, 6, 5),) * 2, stride=2, channels_last=True, seed=0),
        dtypes=(),
        grad_args=(0, 1, 2, 3),
    ),
]


class TestDeformConvConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward vs reference


@pytest.mark.parametrize("modulated", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_reference(case, dtype, modulated):
    n, c, h, w, c_out, k, s, p, d, g, dg = CASES[case]
    (x, offset, mask, weight, bias), kw = make_inputs(n, c, h, w, c_out, k, s, p, d, g, dg, dtype=dtype, seed=case)
    mask = mask if modulated else None
    tensors = [x, offset, mask, weight, bias]
    out, grads = value_and_grads(lambda *t: call(*t, **kw), tensors)
    exp, exp_grads = value_and_grads(
        lambda *t: reference(*t, **kw), [t.double() if t is not None else None for t in tensors]
    )
    assert out.dtype == dtype and out.shape == exp.shape
    assert exp.abs().max() > 0.1
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else TOL[dtype]
    torch.testing.assert_close(out.double(), exp, **tol)
    names = ["input", "offset"] + (["mask"] if modulated else []) + ["weight", "bias"]
    for name, got, want in zip(names, grads, exp_grads):
        assert got.dtype == dtype and got.shape == want.shape, name
        assert want.abs().max() > 0, name
        torch.testing.assert_close(got.double(), want, **tol, msg=lambda m: f"gradient of {name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_cpu(dtype):
    (x, offset, mask, weight, bias), kw = make_inputs(2, 8, 9, 8, 6, 3, 1, 1, 1, 2, 2, dtype=dtype)
    # samples away from integer coordinates (rounded random offsets hit integers often)
    offset = _fractional_offsets(offset.shape, seed=2).to(dtype)
    out = v2(x, offset, mask, weight, bias, [1, 1], [1, 1], [1, 1], 2, 2)
    exp = reference(x, offset, mask, weight, bias, **kw)  # the same rounded inputs, in float64
    assert out.dtype == dtype
    scale = exp.abs().max().item()
    torch.testing.assert_close(out.double(), exp, atol=TOL[dtype]["atol"] * scale, rtol=TOL[dtype]["rtol"])
    _, grads = value_and_grads(lambda *t: v2(*t, [1, 1], [1, 1], [1, 1], 2, 2), [x, offset, mask, weight, bias])
    _, exp_grads = value_and_grads(
        lambda *t: reference(*t, **kw), [t.double() for t in (x, offset, mask, weight, bias)]
    )
    for got, want in zip(grads, exp_grads):
        assert got.dtype == dtype
        s = want.abs().max().item()
        torch.testing.assert_close(got.double(), want, atol=2 * TOL[dtype]["atol"] * s, rtol=2 * TOL[dtype]["rtol"])


# --------------------------------------------------------------------------- known vectors

# 1x1x2x2 input [[1, 2], [3, 4]], one 1x1 tap with weight 2, bias 0.5, stride 1, no
# padding; per output pixel an offset (dy, dx) and, for DCNv2, a mask value. Derived by hand:
#   (0,0) + (0.5, 0.5)  -> (0.5, 0.5): mean of the four pixels 2.5
#   (0,1) + (0, -1)     -> (0, 0): pixel value 1
#   (1,0) + (-1.5, 0)   -> (-0.5, 0): half of row 0 (row -1 is zero): 0.5
#   (1,1) + (1, 0)      -> (2, 1): outside (y >= H): 0
KNOWN_INPUT = [[[[1.0, 2.0], [3.0, 4.0]]]]
KNOWN_OFFSET = [[[[0.5, 0.0], [-1.5, 1.0]], [[0.5, -1.0], [0.0, 0.0]]]]  # channel 0 dy, 1 dx
KNOWN_MASK = [[[[0.5, 1.0], [2.0, 3.0]]]]
KNOWN_V1 = {
    "output": [[[[5.5, 2.5], [1.5, 0.5]]]],  # 2 * value + 0.5
    "input": [[[[3.5, 0.5], [0.5, 0.5]]]],  # 2 * bilinear weights, summed
    # d value / dy, dx (floor convention at integer coordinates) times the weight 2
    "offset": [[[[4.0, 4.0], [2.0, 0.0]], [[2.0, 2.0], [1.0, 0.0]]]],
    "weight": [[[[4.0]]]],  # sum of the sampled values
    "bias": [4.0],
}
KNOWN_V2 = {
    "output": [[[[3.0, 2.5], [2.5, 0.5]]]],  # 2 * mask * value + 0.5
    "input": [[[[0.5 * 0.5 + 2.0 + 2.0, 0.5 * 0.5], [0.5 * 0.5, 0.5 * 0.5]]]],
    "offset": [[[[2.0, 4.0], [4.0, 0.0]], [[1.0, 2.0], [2.0, 0.0]]]],
    "mask": [[[[5.0, 2.0], [1.0, 0.0]]]],  # 2 * value
    "weight": [[[[0.5 * 2.5 + 1.0 + 2.0 * 0.5]]]],
    "bias": [4.0],
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("modulated", [False, True])
def test_known_vector(modulated, dtype):
    x = torch.tensor(KNOWN_INPUT, dtype=dtype, requires_grad=True)
    offset = torch.tensor(KNOWN_OFFSET, dtype=dtype, requires_grad=True)
    mask = torch.tensor(KNOWN_MASK, dtype=dtype, requires_grad=True)
    weight = torch.full((1, 1, 1, 1), 2.0, dtype=dtype, requires_grad=True)
    bias = torch.tensor([0.5], dtype=dtype, requires_grad=True)
    if modulated:
        out = mmops.modulated_deform_conv2d(x, offset, mask, weight, bias)
        leaves, names, exp = [x, offset, mask, weight, bias], ["input", "offset", "mask", "weight", "bias"], KNOWN_V2
    else:
        out = mmops.deform_conv2d(x, offset, weight, bias)
        leaves, names, exp = [x, offset, weight, bias], ["input", "offset", "weight", "bias"], KNOWN_V1
    torch.testing.assert_close(out, torch.tensor(exp["output"], dtype=dtype), rtol=0, atol=0)
    out.sum().backward()
    for name, leaf in zip(names, leaves):
        torch.testing.assert_close(
            leaf.grad, torch.tensor(exp[name], dtype=dtype), rtol=0, atol=1e-6, msg=lambda m: f"gradient of {name}: {m}"
        )


def test_reference_reproduces_known_vector():
    x = torch.tensor(KNOWN_INPUT, dtype=torch.float64)
    out = reference(
        x,
        torch.tensor(KNOWN_OFFSET, dtype=torch.float64),
        torch.tensor(KNOWN_MASK, dtype=torch.float64),
        torch.full((1, 1, 1, 1), 2.0, dtype=torch.float64),
        torch.tensor([0.5], dtype=torch.float64),
    )
    torch.testing.assert_close(out, torch.tensor(KNOWN_V2["output"], dtype=torch.float64))


def test_zero_offsets_equal_convolution():
    (x, offset, mask, weight, bias), kw = make_inputs(2, 6, 9, 10, 4, 3, 2, 1, 2, 2, 3)
    zero = torch.zeros_like(offset)
    exp = F.conv2d(x, weight, bias, kw["stride"], kw["padding"], kw["dilation"], kw["groups"])
    torch.testing.assert_close(call(x, zero, None, weight, bias, **kw), exp)
    torch.testing.assert_close(call(x, zero, torch.ones_like(mask), weight, bias, **kw), exp)


# --------------------------------------------------------------------------- gradcheck


def _fractional_offsets(shape, seed):
    """Offsets whose samples stay away from integer coordinates (non-differentiable
    points of bilinear interpolation): integer part in [-2, 1] plus a fraction in [0.2, 0.8]."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-2, 2, shape, generator=g) + 0.2 + 0.6 * torch.rand(shape, generator=g)).double()


@pytest.mark.parametrize("modulated", [False, True])
def test_gradcheck(modulated):
    (x, offset, mask, weight, bias), kw = make_inputs(2, 4, 5, 6, 4, (2, 3), 1, 1, (2, 1), 2, 2, seed=5)
    offset = _fractional_offsets(offset.shape, seed=6)
    args = [list(kw["stride"]), list(kw["padding"]), list(kw["dilation"]), 2, 2]
    if modulated:
        inputs = tuple(t.requires_grad_(True) for t in (x, offset, mask, weight, bias))
        fn = lambda *t: v2(*t, *args)  # noqa: E731
    else:
        inputs = tuple(t.requires_grad_(True) for t in (x, offset, weight, bias))
        fn = lambda *t: v1(*t, *args)  # noqa: E731
    assert torch.autograd.gradcheck(fn, inputs, check_batched_grad=False)


def test_gradcheck_strided_no_bias():
    (x, offset, mask, weight, _), _ = make_inputs(1, 3, 7, 7, 2, 3, 2, 0, 1, 1, 3, seed=7, with_bias=False)
    offset = _fractional_offsets(offset.shape, seed=8)
    inputs = tuple(t.requires_grad_(True) for t in (x, offset, mask, weight))
    assert torch.autograd.gradcheck(
        lambda a, b, c, d: v2(a, b, c, d, None, [2, 2], [0, 0], [1, 1], 1, 3), inputs, check_batched_grad=False
    )


def test_double_backward_raises():
    (x, offset, mask, weight, bias), _ = make_inputs(1, 2, 5, 5, 2, 3, padding=1)
    x.requires_grad_(True)
    out = v2(x, offset, mask, weight, bias, [1, 1], [1, 1], [1, 1], 1, 1)
    go = torch.randn_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="modulated_deform_conv2d: double backward"):
        (g,) = torch.autograd.grad(out, x, go, create_graph=True)
        torch.autograd.grad(g.sum(), (x, go))


def test_partial_gradients():
    """Only the gradients asked for are computed; each equals the full computation's."""
    (x, offset, mask, weight, bias), kw = make_inputs(2, 4, 6, 6, 4, 3, 1, 1, 1, 2, 2)
    _, full = value_and_grads(lambda *t: call(*t, **kw), [x, offset, mask, weight, bias])
    tensors = [x, offset, mask, weight, bias]
    for i in range(5):
        leaves = [t.detach().clone().requires_grad_(j == i) for j, t in enumerate(tensors)]
        out = call(*leaves, **kw)
        go = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        (g,) = torch.autograd.grad(out, leaves[i], go)
        torch.testing.assert_close(g, full[i])
    # the helper op returns empty tensors for what is not asked
    out = call(x, offset, mask, weight, bias, **kw)
    r = backward_op(
        torch.ones_like(out), x, offset, mask, weight, [1, 1], [1, 1], [1, 1], 2, 2, [False, True, False, True, False]
    )
    assert [t.shape for t in r] == [(0,), offset.shape, (0,), weight.shape, (0,)]
    r = backward_op(torch.ones_like(out), x, offset, None, weight, [1, 1], [1, 1], [1, 1], 2, 2, [True] * 5)
    assert [t.shape for t in r] == [x.shape, offset.shape, (0,), weight.shape, (4,)]


# --------------------------------------------------------------------------- torchvision


@requires_torchvision
@pytest.mark.parametrize("modulated", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_torchvision(dtype, modulated):
    import torchvision

    for i, (n, c, h, w, c_out, k, s, p, d, g, dg) in enumerate(CASES):
        (x, offset, mask, weight, bias), kw = make_inputs(
            n, c, h, w, c_out, k, s, p, d, g, dg, dtype=dtype, seed=20 + i
        )
        mask = mask if modulated else None
        out, grads = value_and_grads(lambda *t: call(*t, **kw), [x, offset, mask, weight, bias])
        exp, exp_grads = value_and_grads(
            lambda a, b, m, wt, bs: torchvision.ops.deform_conv2d(
                a, b, wt, bs, kw["stride"], kw["padding"], kw["dilation"], mask=m
            ),
            [x, offset, mask, weight, bias],
        )
        tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else TOL[dtype]
        torch.testing.assert_close(out, exp, **tol)
        for got, want in zip(grads, exp_grads):
            torch.testing.assert_close(got, want, **tol)


# --------------------------------------------------------------------------- special inputs


def test_zero_input_channels_give_bias():
    x = torch.randn(2, 0, 5, 5, dtype=torch.float64, requires_grad=True)
    offset = torch.randn(2, 18, 5, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(3, 0, 3, 3, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, dtype=torch.float64, requires_grad=True)
    out = v1(x, offset, weight, bias, [1, 1], [1, 1], [1, 1], 1, 1)
    torch.testing.assert_close(out, bias.detach().view(1, 3, 1, 1).expand(2, 3, 5, 5))
    gx, go, gw, gb = torch.autograd.grad(out.sum(), (x, offset, weight, bias))
    assert gx.shape == x.shape and gw.shape == weight.shape
    assert torch.equal(go, torch.zeros_like(offset))
    torch.testing.assert_close(gb, torch.full((3,), 50.0, dtype=torch.float64))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e30])
@pytest.mark.parametrize("which", ["dy", "dx"])
def test_nonfinite_offset_samples_zero(which, bad):
    """A NaN/Inf (or huge) offset makes that sample 0: the output equals the op
    with that tap's mask set to 0, and its offset / mask gradients are 0."""
    (x, offset, mask, weight, bias), kw = make_inputs(2, 4, 6, 6, 3, 3, 1, 1, 1, 1, 2, seed=3)
    n, dg, k, ho, wo = 1, 1, 4, 2, 3
    bad_offset = offset.clone()
    bad_offset[n, (dg * 9 + k) * 2 + (0 if which == "dy" else 1), ho, wo] = bad
    masked = mask.clone()
    masked[n, dg * 9 + k, ho, wo] = 0
    out, grads = value_and_grads(lambda *t: call(*t, **kw), [x, bad_offset, mask, weight, bias])
    exp, exp_grads = value_and_grads(lambda *t: call(*t, **kw), [x, offset, masked, weight, bias])
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, exp)
    gx, goff, gmask, gw, gb = grads
    assert torch.isfinite(goff).all() and torch.isfinite(gmask).all()
    assert goff[n, (dg * 9 + k) * 2 : (dg * 9 + k) * 2 + 2, ho, wo].abs().max() == 0
    assert gmask[n, dg * 9 + k, ho, wo] == 0
    torch.testing.assert_close(gx, exp_grads[0])
    torch.testing.assert_close(gw, exp_grads[3])
    # DCNv1 too
    out1 = call(x, bad_offset, None, weight, bias, **kw)
    assert torch.isfinite(out1).all()


@pytest.mark.parametrize("layout", ["channels_last", "sliced", "expanded_grad"])
def test_layouts(layout):
    (x, offset, mask, weight, bias), kw = make_inputs(2, 6, 7, 9, 4, 3, 1, 1, 1, 2, 3, seed=9)
    exp, exp_grads = value_and_grads(lambda *t: call(*t, **kw), [x, offset, mask, weight, bias])
    if layout == "channels_last":
        xs = x.contiguous(memory_format=torch.channels_last)
        out, grads = value_and_grads(lambda *t: call(*t, **kw), [xs, offset, mask, weight, bias])
        assert out.is_contiguous(memory_format=torch.channels_last)
        leaf = xs.detach().clone(memory_format=torch.channels_last).requires_grad_(True)
        (gx,) = torch.autograd.grad(call(leaf, offset, mask, weight, bias, **kw).sum(), leaf)
        assert gx.is_contiguous(memory_format=torch.channels_last)
    elif layout == "sliced":
        big = torch.zeros(2, 12, 7, 18, dtype=torch.float64)
        big[:, ::2, :, ::2] = x
        off_t = offset.transpose(2, 3).contiguous().transpose(2, 3)
        assert not off_t.is_contiguous()
        out = call(
            big[:, ::2, :, ::2],
            off_t,
            mask[:, :, :, :],
            weight.transpose(2, 3).contiguous().transpose(2, 3),
            bias,
            **kw,
        )
        torch.testing.assert_close(out, exp, rtol=0, atol=0)
        return
    else:  # a grad_output with zero strides (as from out.sum())
        leaves = [t.detach().clone().requires_grad_(True) for t in (x, offset, mask, weight, bias)]
        out = call(*leaves, **kw)
        grads = torch.autograd.grad(out.sum(), leaves)
        exp_out, exp_grads = out, torch.autograd.grad(call(*leaves, **kw), leaves, torch.ones_like(out))
        exp = exp_out
    torch.testing.assert_close(out, exp, rtol=0, atol=1e-12)
    for g, e in zip(grads, exp_grads):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-12)


def test_batch_chunks_match_one_chunk(monkeypatch):
    """The batch is processed in chunks when the column buffer would exceed its
    budget (512 MiB; lowered here through the testing knob)."""
    (x, offset, mask, weight, bias), kw = make_inputs(5, 4, 6, 6, 6, 3, 1, 1, 1, 2, 2, seed=11)
    exp, exp_grads = value_and_grads(lambda *t: call(*t, **kw), [x, offset, mask, weight, bias])
    per_image = 6 * 6 * 4 * 9 * 8
    monkeypatch.setenv("MMOPS_DEFORM_CONV_COLUMN_BYTES", str(2 * per_image))  # chunks of 2, 2, 1 images
    out, grads = value_and_grads(lambda *t: call(*t, **kw), [x, offset, mask, weight, bias])
    torch.testing.assert_close(out, exp, rtol=0, atol=1e-12)
    for g, e in zip(grads, exp_grads):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-12)


def test_input_smaller_than_kernel_with_padding():
    (x, offset, mask, weight, bias), kw = make_inputs(1, 2, 2, 1, 3, 3, 1, 1, 1)
    out = call(x, offset, mask, weight, bias, **kw)
    assert out.shape == (1, 3, 2, 1)
    torch.testing.assert_close(out, reference(x, offset, mask, weight, bias, **kw))


# --------------------------------------------------------------------------- errors


def test_device_mismatch_raises_on_meta_too():
    x, o, m, w, b = (t.to("meta") for t in _good())
    with pytest.raises(RuntimeError, match="expected offset on the device of input"):
        v2(x, torch.zeros(2, 36, 6, 6), m, w, b, P1, P1, P1, 2, 2)


def test_backward_helper_checks():
    x, o, m, w, b = _good()
    out = v2(x, o, m, w, b, P1, P1, P1, 2, 2)
    with pytest.raises(RuntimeError, match=r"_deform_conv2d_backward: expected grad_output of shape \[2, 6, 6, 6\]"):
        backward_op(out[:, :5], x, o, m, w, P1, P1, P1, 2, 2, [True] * 5)
    with pytest.raises(RuntimeError, match="expected grad_output to have the dtype of input"):
        backward_op(out.double(), x, o, m, w, P1, P1, P1, 2, 2, [True] * 5)


# --------------------------------------------------------------------------- Python API / modules


def test_functional_wrappers():
    (x, offset, mask, weight, bias), kw = make_inputs(2, 4, 7, 7, 4, 3, 2, 1, 1, 2, 2)
    exp = v2(x, offset, mask, weight, bias, [2, 2], [1, 1], [1, 1], 2, 2)
    torch.testing.assert_close(
        mmops.modulated_deform_conv2d(x, offset, mask, weight, bias, 2, 1, 1, 2, 2), exp, rtol=0, atol=0
    )
    torch.testing.assert_close(
        mmops.modulated_deform_conv2d(
            x, offset, mask, weight, bias, stride=(2, 2), padding=[1, 1], groups=2, deform_groups=2
        ),
        exp,
        rtol=0,
        atol=0,
    )
    exp1 = v1(x, offset, weight, None, [2, 2], [1, 1], [1, 1], 2, 2)
    torch.testing.assert_close(mmops.deform_conv2d(x, offset, weight, None, 2, 1, 1, 2, 2), exp1, rtol=0, atol=0)
    with pytest.raises(ValueError, match="stride"):
        mmops.deform_conv2d(x, offset, weight, None, (1, 2, 3))


def test_modules_mmcv_interface():
    torch.manual_seed(12)
    m = mmops.DeformConv2d(4, 6, 3, stride=1, padding=1, dilation=1, groups=2, deform_groups=2)
    assert m.weight.shape == (6, 2, 3, 3) and m.kernel_size == (3, 3) and m.stride == (1, 1)
    assert not hasattr(m, "bias") or m.bias is None
    assert m.im2col_step == 32 and m.transposed is False and m.output_padding == (0,)
    with pytest.raises(ValueError, match="bias"):
        mmops.DeformConv2d(4, 6, 3, bias=True)
    with pytest.raises(ValueError, match="groups"):
        mmops.DeformConv2d(4, 6, 3, groups=3)
    # kaiming_uniform with relu gain: bound sqrt(6 / fan_in)
    assert m.weight.abs().max() <= math.sqrt(6 / (2 * 9)) + 1e-6
    x = torch.randn(2, 4, 8, 8)
    offset = torch.randn(2, 36, 8, 8)
    torch.testing.assert_close(m(x, offset), v1(x, offset, m.weight, None, P1, P1, P1, 2, 2), rtol=0, atol=0)

    mm = mmops.ModulatedDeformConv2d(4, 6, (3, 3), 2, 1, 1, 1, 2, True)
    assert mm.bias is not None and torch.equal(mm.bias, torch.zeros(6))
    assert mm.weight.abs().max() <= 1 / math.sqrt(4 * 9)
    assert mmops.ModulatedDeformConv2d(4, 6, 3, bias=False).bias is None
    offset2, mask2 = torch.randn(2, 36, 4, 4), torch.rand(2, 18, 4, 4)
    torch.testing.assert_close(
        mm(x, offset2, mask2), v2(x, offset2, mask2, mm.weight, mm.bias, [2, 2], P1, P1, 1, 2), rtol=0, atol=0
    )
    assert "deform_groups=2" in repr(mm) and "bias=True" in repr(mm)


def test_pack_modules_start_as_convolutions():
    torch.manual_seed(13)
    x = torch.randn(2, 4, 9, 9)
    dcn = mmops.DeformConv2dPack(4, 6, 3, stride=2, padding=1, deform_groups=2)
    assert dcn.conv_offset.out_channels == 2 * 2 * 9 and torch.equal(
        dcn.conv_offset.weight, torch.zeros_like(dcn.conv_offset.weight)
    )
    torch.testing.assert_close(dcn(x), F.conv2d(x, dcn.weight, None, 2, 1), rtol=1e-5, atol=1e-5)
    dcn2 = mmops.ModulatedDeformConv2dPack(4, 6, 3, padding=1, deform_groups=2)
    assert dcn2.conv_offset.out_channels == 3 * 2 * 9
    with torch.no_grad():
        dcn2.bias.normal_()
    # zero offsets, mask sigmoid(0) = 0.5
    torch.testing.assert_close(dcn2(x), F.conv2d(x, dcn2.weight * 0.5, dcn2.bias, 1, 1), rtol=1e-5, atol=1e-5)
    # trained offsets: gradients reach conv_offset
    dcn2(x).square().sum().backward()
    assert dcn2.conv_offset.weight.grad.abs().sum() > 0 and dcn2.weight.grad.abs().sum() > 0


def test_pack_module_matches_manual_split():
    torch.manual_seed(14)
    m = mmops.ModulatedDeformConv2dPack(4, 5, 3, padding=1, deform_groups=2)
    with torch.no_grad():
        m.conv_offset.weight.normal_(std=0.3)
        m.conv_offset.bias.normal_()
    x = torch.randn(2, 4, 6, 7)
    out = m.conv_offset(x)
    o1, o2, mk = torch.chunk(out, 3, dim=1)
    exp = v2(x, torch.cat([o1, o2], 1), mk.sigmoid(), m.weight, m.bias, P1, P1, P1, 1, 2)
    torch.testing.assert_close(m(x), exp, rtol=0, atol=0)


def test_pack_legacy_state_dict_keys():
    """mmcv's rename of pre-version-2 keys `<name>_offset.*` (as in mmcv, effective
    where the module's own state dict is loaded: the root prefix)."""
    m = mmops.ModulatedDeformConv2dPack(4, 6, 3, padding=1)
    state = {k: v.clone() + 1 for k, v in m.state_dict().items()}
    legacy = {k: v for k, v in state.items() if not k.startswith("conv_offset")}
    legacy["_offset.weight"] = state["conv_offset.weight"]
    legacy["_offset.bias"] = state["conv_offset.bias"]
    fresh = mmops.ModulatedDeformConv2dPack(4, 6, 3, padding=1)
    fresh.load_state_dict(legacy)  # no version metadata: legacy names are renamed
    assert torch.equal(fresh.conv_offset.weight, state["conv_offset.weight"])
    assert torch.equal(fresh.conv_offset.bias, state["conv_offset.bias"])
    assert torch.equal(fresh.weight, state["weight"])
    d = mmops.DeformConv2dPack(4, 6, 3)
    d.load_state_dict(mmops.DeformConv2dPack(4, 6, 3).state_dict())  # current names load as they are


@pytest.mark.parametrize("cls", [mmops.DeformConv2d, mmops.ModulatedDeformConv2d, mmops.DeformConv2dPack])
def test_deformable_groups_is_mmcvs_old_name(cls):
    torch.manual_seed(0)
    with pytest.warns(DeprecationWarning, match="deformable_groups"):
        old = cls(4, 4, 3, padding=1, deformable_groups=2)
    assert old.deform_groups == 2
    new = cls(4, 4, 3, padding=1, deform_groups=2)
    assert old.state_dict().keys() == new.state_dict().keys()
    with pytest.raises(ValueError, match="disagree"):
        cls(4, 4, 3, deform_groups=4, deformable_groups=2)


def test_modulated_module_reads_leading_block_of_larger_offset():
    """DyHead gives ModulatedDeformConv2d the offset and mask of a larger level; mmcv reads
    each image's flattened buffer from its start as [C, H_out, W_out]."""
    torch.manual_seed(0)
    conv = mmops.ModulatedDeformConv2d(4, 6, 3, stride=1, padding=1).double()
    x = torch.randn(2, 4, 5, 6, dtype=torch.double)  # output 5 x 6
    big = torch.randn(2, 27, 9, 11, dtype=torch.double, requires_grad=True)  # a larger level's
    offset_buf, mask_buf = big[:, :18], big[:, 18:].sigmoid()  # DyHead's slices (non-contiguous)
    exact_offset = offset_buf.contiguous().view(2, -1)[:, : 18 * 30].view(2, 18, 5, 6)
    exact_mask = mask_buf.reshape(2, -1)[:, : 9 * 30].reshape(2, 9, 5, 6)
    # the exact block, built by hand element by element for image 1, channel 3
    flat = offset_buf[1].contiguous().flatten()
    assert torch.equal(exact_offset[1, 3], flat[3 * 30 : 4 * 30].view(5, 6))
    got = conv(x, offset_buf, mask_buf)
    expected = conv(x, exact_offset.detach(), exact_mask.detach())
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    got.sum().backward()
    grad = big.grad
    # the part of the buffer past the leading block gets no gradient
    assert torch.count_nonzero(grad[:, :18].reshape(2, -1)[:, 18 * 30 :]) == 0
    assert torch.count_nonzero(grad[:, :18].reshape(2, -1)[:, : 18 * 30]) > 0
    with pytest.raises(RuntimeError, match="offset"):  # smaller than the output: an error
        conv(x, offset_buf[:, :, :2, :2], mask_buf[:, :, :2, :2])


def test_autocast_modules_run_in_offset_dtype():
    torch.manual_seed(15)
    m = mmops.ModulatedDeformConv2dPack(8, 8, 3, padding=1)
    with torch.no_grad():
        m.conv_offset.weight.normal_(std=0.1)
    x = torch.randn(1, 8, 6, 6)
    exp = m(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), exp, atol=0.1, rtol=0.05)


# --------------------------------------------------------------------------- CUDA

CUDA_CASES = CASES + [
    (2, 64, 20, 24, 32, 3, 1, 1, 1, 1, 1),  # wide vectors, 16 lanes per item
    (1, 256, 12, 10, 64, 3, 1, 1, 1, 1, 1),  # 32 lanes, two passes (float)
    (2, 48, 11, 13, 24, 3, 2, 1, 1, 3, 2),  # groups and deform groups with wide vectors
    (2, 18, 9, 9, 9, 3, 1, 1, 1, 3, 1),  # channels not a multiple of 4: scalar path
    (1, 40, 8, 8, 16, (1, 3), 1, (0, 1), 1, 2, 5),
]


def _cuda_tolerance(dtype, reference):
    """Tolerance of a CUDA result against the CPU kernel in the same dtype (which
    computes sample coordinates in the same precision), scaled by the values' magnitude."""
    scale = max(reference.abs().max().item(), 1e-30)
    if dtype == torch.float64:
        return dict(atol=1e-10 * max(scale, 1), rtol=1e-10)
    if dtype == torch.float32:
        return dict(atol=2e-5 * scale, rtol=2e-5)
    return dict(atol=TOL[dtype]["atol"] * 2 * scale, rtol=TOL[dtype]["rtol"] * 2)


@pytest.mark.cuda
def test_cuda_tf32_follows_cudnn_flag():
    before = torch.backends.cudnn.allow_tf32
    try:
        (x, offset, mask, weight, bias), kw = make_inputs(2, 64, 16, 16, 64, 3, 1, 1, 1, 1, 1, dtype=torch.float32)
        exp = call(x.double(), offset.double(), mask.double(), weight.double(), bias.double(), **kw)
        args = [t.cuda() for t in (x, offset, mask, weight, bias)]
        torch.backends.cudnn.allow_tf32 = True
        out_tf32 = call(*args, **kw).double().cpu()
        torch.backends.cudnn.allow_tf32 = False
        out_fp32 = call(*args, **kw).double().cpu()
        scale = exp.abs().max().item()
        assert (out_fp32 - exp).abs().max().item() <= 2e-5 * scale
        assert (out_tf32 - exp).abs().max().item() <= 5e-3 * scale  # TF32: 10-bit mantissa products
    finally:
        torch.backends.cudnn.allow_tf32 = before


@pytest.mark.cuda
@requires_torchvision
@pytest.mark.parametrize("modulated", [False, True])
def test_cuda_matches_torchvision(modulated):
    import torchvision

    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        for i, (n, c, h, w, c_out, k, s, p, d, g, dg) in enumerate(CUDA_CASES):
            (x, offset, mask, weight, bias), kw = make_inputs(
                n, c, h, w, c_out, k, s, p, d, g, dg, dtype=torch.float32, seed=60 + i
            )
            tensors = [t.cuda() for t in (x, offset, mask, weight, bias)]
            if not modulated:
                tensors[2] = None
            out, grads = value_and_grads(lambda *t: call(*t, **kw), tensors)
            exp, exp_grads = value_and_grads(
                lambda a, b, m, wt, bs: torchvision.ops.deform_conv2d(
                    a, b, wt, bs, kw["stride"], kw["padding"], kw["dilation"], mask=m
                ),
                tensors,
            )
            torch.testing.assert_close(out, exp, **_cuda_tolerance(torch.float32, exp))
            for got, want in zip(grads, exp_grads):
                torch.testing.assert_close(got, want, **_cuda_tolerance(torch.float32, want))
    finally:
        torch.backends.cudnn.allow_tf32 = before


@pytest.mark.cuda
def test_cuda_special_inputs():
    # NaN offsets, chunked batch
    (x, offset, mask, weight, bias), kw = make_inputs(2, 8, 6, 7, 4, 3, 1, 1, 1, 1, 2, seed=3)
    offset[1, 5] = math.nan
    offset[0, 8] = math.inf
    tensors = [x, offset, mask, weight, bias]
    exp, exp_grads = value_and_grads(lambda *t: call(*t, **kw), tensors)
    out, grads = value_and_grads(lambda *t: call(*t, **kw), [t.cuda() for t in tensors])
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.cpu(), exp)
    for g, e in zip(grads, exp_grads):
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g.cpu(), e)

    os.environ["MMOPS_DEFORM_CONV_COLUMN_BYTES"] = str(6 * 7 * 8 * 9 * 8)  # one image per chunk
    try:
        chunked, chunked_grads = value_and_grads(lambda *t: call(*t, **kw), [t.cuda() for t in tensors])
    finally:
        del os.environ["MMOPS_DEFORM_CONV_COLUMN_BYTES"]
    torch.testing.assert_close(chunked, out)
    for g, e in zip(chunked_grads, grads):
        torch.testing.assert_close(g, e)


@pytest.mark.cuda
def test_cuda_deterministic_mode_raises():
    (x, offset, mask, weight, bias), kw = make_inputs(1, 8, 6, 6, 4, 3, 1, 1, 1, 1, 1, dtype=torch.float32)
    x = x.cuda().requires_grad_(True)
    out = call(x, offset.cuda(), mask.cuda(), weight.cuda(), bias.cuda(), **kw)
    with deterministic_algorithms():
        with pytest.raises(RuntimeError, match="deform_conv2d_backward"):
            torch.autograd.grad(out.sum(), x)
        # without an input gradient there are no atomics: allowed
        off = offset.cuda().requires_grad_(True)
        out2 = call(x.detach(), off, mask.cuda(), weight.cuda(), bias.cuda(), **kw)
        (g,) = torch.autograd.grad(out2.sum(), off)
        assert torch.isfinite(g).all()


@pytest.mark.cuda
def test_cuda_gradcheck():
    (x, offset, mask, weight, bias), kw = make_inputs(1, 8, 5, 6, 4, 3, 1, 1, 1, 2, 2, seed=5)
    offset = _fractional_offsets(offset.shape, seed=6)
    inputs = tuple(t.cuda().requires_grad_(True) for t in (x, offset, mask, weight, bias))
    assert torch.autograd.gradcheck(
        lambda *a: v2(*a, [1, 1], [1, 1], [1, 1], 2, 2), inputs, check_batched_grad=False, nondet_tol=1e-12
    )


# --------------------------------------------------------------------------- hardening (issue 11)

_BIG = 2**63 - 1


@pytest.mark.parametrize("modulated", [False, True])
def test_size_arithmetic_overflow_raises(modulated):
    # int64 wrap-around used to turn these into small (even larger than the input) outputs
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64)
    weight = torch.randn(3, 2, 3, 3, dtype=torch.float64)

    def run(offset_hw, stride=P1, padding=P0, dilation=P1, groups=1, deform_groups=1, xx=x, w=weight):
        kh, kw = w.shape[2:]
        offset = torch.zeros(1, 2 * deform_groups * kh * kw, *offset_hw, dtype=torch.float64, device=xx.device)
        mask = torch.ones(1, deform_groups * kh * kw, *offset_hw, dtype=torch.float64, device=xx.device)
        return call(xx, offset, mask if modulated else None, w, None, stride, padding, dilation, groups, deform_groups)

    # dilation * (kh - 1) + 1 wrapped to -1: the output was [1, 3, 6, 2]
    with pytest.raises(RuntimeError, match=r"dilated kernel height dilation\[0\] \* \(kh - 1\) \+ 1 does not fit"):
        run((6, 2), dilation=[_BIG, 1])
    with pytest.raises(RuntimeError, match=r"dilated kernel width dilation\[1\] \* \(kw - 1\) \+ 1 does not fit"):
        run((2, 6), dilation=[1, 2**62 + 2**61])
    # H + 2 * padding wrapped to H - 2: the output was [1, 3, 1, 2]
    with pytest.raises(RuntimeError, match=r"padded input height H \+ 2 \* padding\[0\] does not fit in int64"):
        run((1, 2), padding=[_BIG, 0])
    with pytest.raises(RuntimeError, match=r"padded input width W \+ 2 \* padding\[1\] does not fit in int64"):
        run((2, 2), padding=[0, 2**62])
    # no input channels: groups / deform_groups divide 0 whatever their size
    x0, w0 = torch.randn(1, 0, 4, 4, dtype=torch.float64), torch.randn(2, 0, 1, 1, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"offset channels 2 \* deform_groups \* kh \* kw does not fit in int64"):
        call(x0, torch.zeros(1, 2, 4, 4, dtype=torch.float64), None, w0, None, P1, P0, P1, 1, 2**62)
    with pytest.raises(RuntimeError, match=r"weight.size\(1\) \* groups .* does not fit in int64"):
        call(
            x0,
            torch.zeros(1, 2, 4, 4, dtype=torch.float64),
            None,
            torch.randn(0, 2**40, 1, 1, dtype=torch.float64),
            None,
            P1,
            P0,
            P1,
            2**40,
            1,
        )
    # a huge but representable output: our error, not an allocation failure
    with pytest.raises(RuntimeError, match=r"output plane H_out \* W_out does not fit in int64"):
        run((1, 1), padding=[2**40, 2**40])
    # the same checks on meta tensors and in the backward helper
    meta = [t.to("meta") for t in (x, weight)]
    with pytest.raises(RuntimeError, match=r"dilation\[0\] \* \(kh - 1\) \+ 1 does not fit"):
        run((6, 2), dilation=[_BIG, 1], xx=meta[0], w=meta[1])


def test_backward_helper_size_overflow_raises():
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64)
    w = torch.randn(3, 2, 3, 3, dtype=torch.float64)
    o = torch.zeros(1, 18, 6, 2, dtype=torch.float64)
    go = torch.ones(1, 3, 6, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"_deform_conv2d_backward: the dilated kernel height .* does not fit"):
        backward_op(go, x, o, None, w, P1, P0, [_BIG, 1], 1, 1, [True] * 5)


def test_huge_taps_are_refused():
    # the CUDA kernels split a tap index in 32 bits (meta tensors: nothing is allocated)
    x = torch.empty(1, 1, 1, 2**31, device="meta")
    w = torch.empty(0, 1, 1, 2**31, device="meta")
    offset = torch.empty(1, 2 * 2**31, 1, 1, device="meta")
    with pytest.raises(RuntimeError, match=r"kernel taps kh \* kw .* at most 2\^31 - 1"):
        call(x, offset, None, w, None, P1, P0, P1, 1, 1)


def _mask_case(bad, dtype=torch.float64):
    """One channel, a 1x1 kernel of weight 1: the output is mask * (the bilinear
    sample) itself. Samples at pixel centres, between pixels, outside the map and
    on zeros; the mask is `bad` (inf, -inf or nan) at some of them."""
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 0.0, 0.0], [7.0, 0.0, 0.0]], dtype=torch.float64).view(1, 1, 3, 3)
    offset = torch.zeros(1, 2, 3, 3, dtype=torch.float64)
    offset[0, :, 0, 1] = 0.25  # between pixels (0,1), (0,2), (1,1), (1,2)
    offset[0, :, 0, 2] = -5.0  # outside the map: the sample is 0
    offset[0, :, 2, 2] = -0.5  # between four zeros: the sample is 0
    mask = torch.full((1, 1, 3, 3), 0.5, dtype=torch.float64)
    for ho, wo in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 2)]:
        mask[0, 0, ho, wo] = bad
    weight = torch.ones(1, 1, 1, 1, dtype=torch.float64)
    return [t.to(dtype) for t in (x, offset, mask, weight)]


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_nonfinite_mask_is_ieee_times_the_sample(bad):
    x, offset, mask, weight = _mask_case(bad)
    out = v2(x, offset, mask, weight, None, P1, P0, P1, 1, 1)
    exp = reference(x, offset, mask, weight, None)
    torch.testing.assert_close(out, exp, equal_nan=True)  # inf / NaN at the same places
    o = out[0, 0]
    if not math.isnan(bad):
        sign = math.copysign(1.0, bad)
        assert o[0, 0].item() == sign * math.inf  # pixel centre 1.0 (was NaN: inf * 0 bilinear weights)
        assert o[1, 0].item() == sign * math.inf  # pixel centre 4.0
        sample = 0.5625 * -2.0 + 0.1875 * 3.0 + 0.1875 * 0.0 + 0.0625 * 0.0
        assert o[0, 1].item() == math.copysign(math.inf, bad * sample)
    assert math.isnan(o[0, 2].item())  # outside: inf * 0
    assert math.isnan(o[1, 1].item())  # the pixel's value is 0
    assert math.isnan(o[2, 2].item())  # four zeros
    assert o[2, 0].item() == 3.5 and o[1, 2].item() == 0.0  # finite masks are unaffected


@pytest.mark.parametrize("threads", [2, 4])
@pytest.mark.parametrize("modulated", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_cpu_backward_bitwise_independent_of_threads(threads, modulated, dtype):
    (x, offset, mask, weight, bias), kw = make_inputs(3, 16, 9, 10, 32, 3, 1, 1, 1, 2, 2, dtype=dtype, seed=21)
    if not modulated:
        mask = None
    tensors = [x, offset, mask, weight, bias]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        out1, g1 = value_and_grads(lambda *t: call(*t, **kw), tensors)
        torch.set_num_threads(threads)
        out2, g2 = value_and_grads(lambda *t: call(*t, **kw), tensors)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(out1, out2)
    for a, b in zip(g1, g2):
        assert torch.equal(a, b)  # grad_weight used to differ (BLAS / oneDNN split the sum over threads)


@pytest.mark.parametrize("modulated", [False, True])
def test_cpu_backward_bitwise_for_noncontiguous_grad_output(modulated):
    (x, offset, mask, weight, bias), kw = make_inputs(2, 8, 7, 8, 24, 3, 1, 1, 1, 1, 2, dtype=torch.float32, seed=22)
    mask_ = mask if modulated else None
    out = call(x, offset, mask_, weight, bias, **kw)
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float32)
    views = [
        go,
        go.transpose(2, 3).contiguous().transpose(2, 3),
        go.contiguous(memory_format=torch.channels_last),
        torch.stack([go, go], -1)[..., 1],
        go.permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3),
    ]
    results = [backward_op(g, x, offset, mask_, weight, *kw.values(), [True] * 5) for g in views]
    for r in results[1:]:
        for a, b in zip(r, results[0]):
            assert torch.equal(a, b)
    # the fixed-order sums are the float64 ones to float32 rounding
    exp = go.double().sum((0, 2, 3))
    torch.testing.assert_close(results[0][4].double(), exp, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_nonfinite_mask_matches_cpu(bad, dtype):
    x, offset, mask, weight = _mask_case(bad, dtype)
    # the forward on its own (exact: one product per output), then a 3x3 case with gradients
    exp = v2(x, offset, mask, weight, None, P1, P0, P1, 1, 1)
    out = v2(*[t.cuda() for t in (x, offset, mask, weight)], None, P1, P0, P1, 1, 1)
    torch.testing.assert_close(out.cpu(), exp, rtol=0, atol=0, equal_nan=True)
    (x, offset, mask, weight, bias), kw = make_inputs(2, 8, 6, 7, 4, 3, 1, 1, 1, 1, 2, dtype=dtype, seed=23)
    mask[0, 3, 1, 2] = bad
    mask[1, 10, 0, 0] = bad
    offset[1, 2 * 10 : 2 * 10 + 2, 0, 0] = -20.0  # that sample outside: NaN
    tensors = [x, offset, mask, weight, bias]
    exp, exp_grads = value_and_grads(lambda *t: call(*t, **kw), tensors)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # full float32 products, as on the CPU
        out, grads = value_and_grads(lambda *t: call(*t, **kw), [t.cuda() for t in tensors])
    assert not torch.isfinite(exp).all()
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else {}
    torch.testing.assert_close(out.cpu(), exp, equal_nan=True, **tol)
    for g, e in zip(grads, exp_grads):
        torch.testing.assert_close(g.cpu(), e, equal_nan=True, **tol)
