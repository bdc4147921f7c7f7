"""Tests of mmops::deform_roi_pool: the conformance case, then the float64 reference,
mmcv's known vectors, gradcheck, the Pack modules, special inputs and CUDA tests."""

import copy
import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import (
    MMCV_ROI_INPUTS,
    TOL,
    invalid_batch_index_inputs,
    random_rois,
    strict_index_check,
    with_batch_index,
)
from deform_roi_pool_reference import deform_roi_pool_reference, reference_with_grads

import mmops

op = torch.ops.mmops.deform_roi_pool
backward_op = torch.ops.mmops._deform_roi_pool_backward

CASES = [((1, 1, 5, 5), (2, 2)), ((2, 3, 7, 12), (3, 4)), ((3, 5, 20, 9), (7, 5))]


def _offset(k, out_size, dtype=torch.float32, device="cpu", spread=1.0):
    return (torch.randn(k, 2, *out_size, dtype=torch.float64) * spread).to(dtype=dtype, device=device)


def grads_of(x, rois, offset, go, out_size, scale, ratio, gamma):
    """(output, grad_input, grad_offset or None) of the op through autograd."""
    x = x.detach().requires_grad_(True)
    off = offset.detach().requires_grad_(True) if offset is not None else None
    out = op(x, rois, off, list(out_size), scale, ratio, gamma)
    inputs = [x] + ([off] if off is not None else [])
    grads = torch.autograd.grad(out, inputs, go)
    return out, grads[0], (grads[1] if off is not None else None)


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    # no size equal to out_h, out_w (2, 3) or 5 (rois' columns): the checks specialise those
    # (duck-sized) dims under torch.compile(dynamic=True)
    (N, C, H, W), K = ((4, 6, 10, 12), 7) if size == 0 else ((6, 4, 14, 9), 11)
    torch.manual_seed(30 + size)
    x = torch.randn(N, C, H, W, dtype=dtype)
    rois = random_rois(K, N, H, W, dtype=dtype, spatial_scale=0.5)
    offset = _offset(K, (2, 3), dtype)
    return Sample((x.to(device), rois.to(device), offset.to(device), [2, 3], 0.5, 0, 0.1))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample(
            (torch.randn(2, 3, 6, 7, **f), torch.zeros(0, 5, **f), torch.zeros(0, 2, 2, 3, **f), [2, 3], 1.0, 0, 0.1),
            out_shapes=[(0, 3, 2, 3)],
        ),
        Sample(
            (
                torch.randn(2, 0, 6, 7, **f),
                random_rois(4, 2, 6, 7, **f),
                torch.randn(4, 2, 2, 3, **f),
                [2, 3],
                1.0,
                2,
                0.1,
            ),
            out_shapes=[(4, 0, 2, 3)],
        ),
    ]


def _cuda_samples(dtype):
    """Maps of several sizes, both grids, offsets and none."""
    torch.manual_seed(9)
    for scale, ratio in ((1.0, 0), (0.5, 2), (0.25, 1)):
        for (N, C, H, W), out_size in CASES + [((2, 67, 30, 41), (7, 7))]:
            x = torch.randn(N, C, H, W).to(dtype)
            rois = random_rois(20, N, H, W, dtype=dtype, spatial_scale=scale)
            yield Sample((x, rois, _offset(20, out_size, dtype), list(out_size), scale, ratio, 0.1))
            yield Sample((x, rois, None, list(out_size), scale, ratio, 0.1))


class _Net(torch.nn.Module):
    """deform_roi_pool in a model: the module, the wrapper and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.DeformRoIPool((2, 3), 0.5, 0, 0.2)

    def forward(self, x: torch.Tensor, rois: torch.Tensor, offset: torch.Tensor):
        plain = mmops.deform_roi_pool(x, rois, None, [2, 3], 0.5)
        shifted = torch.ops.mmops.deform_roi_pool(x * 1.5, rois, offset.tanh(), [2, 3], 0.5, 2, 0.1)
        return (plain.sin() + shifted).sum(dim=1), self.pool(x * 2.0, rois, offset)


def _helpers(sample):
    x, rois, offset, out_size, scale, ratio, gamma = sample.args
    go = torch.randn(rois.shape[0], x.shape[1], *out_size, dtype=x.dtype, device=x.device)
    return [
        (backward_op, (go, x, rois, offset, scale, ratio, gamma)),
        (backward_op, (go, x, rois, None, scale, ratio, gamma)),
    ]


def _message(text):
    return f"mmops::deform_roi_pool: .*{text}"


def _bad(make, text, **kw):
    return BadInput(make, _message(text), **kw)


def _with(args, **changes):
    names = ["x", "r", "offset", "out_size", "scale", "ratio", "gamma"]
    values = dict(zip(names, args))
    values.update(changes)
    return tuple(values[n] for n in names)


def _cuda_tol(dtype, what, expected, sample):
    """Samples shifted by gamma * offset * roi size, and the offset gradient summing channels x
    samples scaled by the same: their float32 rounding (the CPU's against float64 too) grows
    with the values' magnitude, so the tolerance does."""
    tol = TOL[dtype]
    if dtype == torch.float32:
        scale = max(expected.abs().max().item(), 1.0)
        tol = dict(rtol=tol["rtol"], atol=tol["atol"] * 2 * scale)
    return tol


CONFORMANCE = [
    ConformanceCase(
        "deform_roi_pool",
        op,
        _sample,
        grad_args=(0, 2),
        feature_args=(0,),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cuda_tol=_cuda_tol,
        bad_inputs={
            "input_3d": _bad(lambda *a: _with(a, x=a[0][0]), "input"),
            "int_input": _bad(lambda *a: _with(a, x=a[0].int(), r=a[1].int(), offset=a[2].int()), "input"),
            "rois_1d": _bad(lambda *a: _with(a, r=a[1][0]), "rois"),
            "rois_4_cols": _bad(lambda *a: _with(a, r=a[1][:, :4]), "rois"),
            "rois_dtype": _bad(lambda *a: _with(a, r=a[1].double()), "rois"),
            "offset_dtype": _bad(lambda *a: _with(a, offset=a[2].double()), "offset"),
            "offset_3d": _bad(lambda *a: _with(a, offset=a[2][0]), "offset"),
            "offset_rows": _bad(lambda *a: _with(a, offset=a[2][1:]), "offset"),
            "offset_3_channels": _bad(lambda *a: _with(a, offset=a[2][:, :1].repeat(1, 3, 1, 1)), "offset"),
            "offset_bins": _bad(lambda *a: _with(a, offset=a[2][:, :, :1]), "offset"),
            "output_h_zero": _bad(lambda *a: _with(a, out_size=[0, 3]), "output_size"),
            "output_w_negative": _bad(lambda *a: _with(a, out_size=[2, -1]), "output_size"),
            "output_too_large": _bad(lambda *a: _with(a, out_size=[5000, 3], offset=None), "output_size"),
            "spatial_scale_zero": _bad(lambda *a: _with(a, scale=0.0), "spatial_scale"),
            "spatial_scale_nan": _bad(lambda *a: _with(a, scale=math.nan), "spatial_scale"),
            "spatial_scale_inf": _bad(lambda *a: _with(a, scale=math.inf), "spatial_scale"),
            "sampling_ratio_negative": _bad(lambda *a: _with(a, ratio=-1), "sampling_ratio"),
            "sampling_ratio_too_large": _bad(lambda *a: _with(a, ratio=513), "sampling_ratio"),
            "gamma_nan": _bad(lambda *a: _with(a, gamma=math.nan), "gamma"),
            "gamma_inf": _bad(lambda *a: _with(a, gamma=math.inf), "gamma"),
            **{
                f"batch_index_{name}": BadInput(
                    lambda *a, v=v: _with(a, r=with_batch_index(a[1], 2, v(a[0].shape[0]))),
                    "deform_roi_pool: the batch index",
                )
                for name, v in (
                    ("-1", lambda n: -1.0),
                    ("N", lambda n: float(n)),
                    ("N+5", lambda n: n + 5.0),
                    ("nan", lambda n: math.nan),
                )
            },
        },
    ),
]


class TestDeformRoIPoolConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ratio", [0, 1, 2])
@pytest.mark.parametrize("with_offset", [True, False])
def test_matches_reference(dtype, ratio, with_offset):
    torch.manual_seed(ratio)
    for scale in (1.0, 0.5):
        for (N, C, H, W), out_size in CASES:
            x = torch.randn(N, C, H, W, dtype=dtype)
            rois = random_rois(12, N, H, W, dtype=dtype, spatial_scale=scale)
            offset = _offset(12, out_size, dtype, spread=2.0) if with_offset else None
            go = torch.randn(12, C, *out_size, dtype=dtype)
            out, gx, goff = grads_of(x, rois, offset, go, out_size, scale, ratio, 0.1)
            exp, gxe, goffe = reference_with_grads(x, rois, offset, out_size, scale, ratio, 0.1, go)
            assert exp.abs().sum() > 0 and gxe.abs().sum() > 0
            assert out.dtype == dtype and out.shape == (12, C, *out_size)
            tol = TOL[dtype] if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(out, exp.to(dtype), **tol)
            torch.testing.assert_close(gx, gxe.to(dtype), **tol)
            if with_offset:
                assert goffe.abs().sum() > 0
                torch.testing.assert_close(goff, goffe.to(dtype), **tol)


@pytest.mark.parametrize("gamma", [0.0, 0.1, -0.3])
def test_gamma_scales_the_shift(gamma):
    torch.manual_seed(3)
    x = torch.randn(2, 3, 11, 13, dtype=torch.float64)
    rois = random_rois(8, 2, 11, 13, dtype=torch.float64)
    offset = _offset(8, (3, 3), torch.float64)
    out = op(x, rois, offset, [3, 3], 1.0, 2, gamma)
    torch.testing.assert_close(
        out, deform_roi_pool_reference(x, rois, offset, (3, 3), 1.0, 2, gamma), **TOL[torch.float64]
    )
    if gamma == 0.0:
        torch.testing.assert_close(out, op(x, rois, None, [3, 3], 1.0, 2, 0.1), rtol=0, atol=0)


# (input, roi) -> (output, grad of output.sum()): mmcv's tests/test_ops/test_deform_roi_pool.py,
# DeformRoIPoolPack((2, 2), C, spatial_scale=1, sampling_ratio=2) (its offsets start at zero)
MMCV_OUTPUTS = [
    ([[[[1, 1.25], [1.5, 1.75]]]], [[[[3.0625, 0.4375], [0.4375, 0.0625]]]]),
    (
        [[[[1.0, 1.25], [1.5, 1.75]], [[4, 3.75], [3.5, 3.25]]]],
        [[[[3.0625, 0.4375], [0.4375, 0.0625]], [[3.0625, 0.4375], [0.4375, 0.0625]]]],
    ),
    (
        [[[[1.9375, 4.75], [7.5625, 10.375]]]],
        [
            [
                [
                    [0.47265625, 0.4296875, 0.4296875, 0.04296875],
                    [0.4296875, 0.390625, 0.390625, 0.0390625],
                    [0.4296875, 0.390625, 0.390625, 0.0390625],
                    [0.04296875, 0.0390625, 0.0390625, 0.00390625],
                ]
            ]
        ],
    ),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(MMCV_ROI_INPUTS)))
def test_mmcv_known_vectors(case, dtype):
    (feat, roi), (expected, expected_grad) = MMCV_ROI_INPUTS[case], MMCV_OUTPUTS[case]
    x = torch.tensor(feat, dtype=dtype, requires_grad=True)
    rois = torch.tensor(roi, dtype=dtype)
    torch.manual_seed(0)
    pool = mmops.DeformRoIPoolPack((2, 2), x.size(1), spatial_scale=1.0, sampling_ratio=2).to(dtype)
    out = pool(x, rois)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(out, torch.tensor(expected, dtype=dtype), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x.grad, torch.tensor(expected_grad, dtype=dtype), rtol=1e-6, atol=1e-6)
    # the same through the op without offset
    torch.testing.assert_close(op(x, rois, None, [2, 2], 1.0, 2, 0.1), out, rtol=0, atol=0)


def _gradcheck_inputs(seed, ratio):
    torch.manual_seed(seed)
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64, requires_grad=True)
    rois = random_rois(5, 2, 7, 8, dtype=torch.float64, extra=False)
    offset = _offset(5, (2, 3), torch.float64, spread=1.5).requires_grad_(True)
    return x, rois, offset


@pytest.mark.parametrize("ratio", [0, 2])
def test_gradcheck(ratio):
    x, rois, offset = _gradcheck_inputs(4 + ratio, ratio)
    fn = lambda x, offset: op(x, rois, offset, [2, 3], 1.0, ratio, 0.1)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, offset), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(lambda x: op(x, rois, None, [2, 3], 1.0, ratio, 0.1), (x,), eps=1e-6, atol=1e-6)


def test_offset_gradient_is_zero_along_a_clamped_axis():
    # every sample past the last row (y >= H - 1): the value does not move with y
    x = torch.randn(1, 2, 4, 6, dtype=torch.float64)
    rois = torch.tensor([[0, 1.0, 3.6, 4.0, 3.9]], dtype=torch.float64)
    offset = torch.zeros(1, 2, 1, 1, dtype=torch.float64, requires_grad=True)
    out = op(x, rois, offset, [1, 1], 1.0, 2, 0.1)
    (g,) = torch.autograd.grad(out.sum(), offset)
    assert g[0, 1].abs().item() == 0.0 and g[0, 0].abs().item() > 0


# --------------------------------------------------------------------------- modules


def _randomize_last_layers(module, seed=0):
    torch.manual_seed(seed)
    with torch.no_grad():
        for seq in (module.offset_fc, getattr(module, "mask_fc", None)):
            if seq is not None:
                for layer in seq:
                    if isinstance(layer, torch.nn.Linear):
                        layer.weight.normal_(0, 0.3)
                        layer.bias.normal_(0, 0.3)


def test_pack_state_dict_names_are_mmcv():
    pack = mmops.ModulatedDeformRoIPoolPack(7, 256, deform_fc_channels=1024)
    shapes = {k: tuple(v.shape) for k, v in pack.state_dict().items()}
    assert shapes == {
        "offset_fc.0.weight": (1024, 7 * 7 * 256),
        "offset_fc.0.bias": (1024,),
        "offset_fc.2.weight": (1024, 1024),
        "offset_fc.2.bias": (1024,),
        "offset_fc.4.weight": (98, 1024),
        "offset_fc.4.bias": (98,),
        "mask_fc.0.weight": (1024, 7 * 7 * 256),
        "mask_fc.0.bias": (1024,),
        "mask_fc.2.weight": (49, 1024),
        "mask_fc.2.bias": (49,),
    }
    for name in ("offset_fc.4.weight", "offset_fc.4.bias", "mask_fc.2.weight", "mask_fc.2.bias"):
        assert torch.count_nonzero(pack.state_dict()[name]) == 0
    assert set(mmops.DeformRoIPoolPack(7, 256).state_dict()) == {k for k in shapes if k.startswith("offset_fc")}


def test_modulated_pack_starts_at_half():
    (feat, roi), (expected, _) = MMCV_ROI_INPUTS[2], MMCV_OUTPUTS[2]
    pool = mmops.ModulatedDeformRoIPoolPack((2, 2), 1, spatial_scale=1.0, sampling_ratio=2)
    out = pool(torch.tensor(feat), torch.tensor(roi))
    torch.testing.assert_close(out, 0.5 * torch.tensor(expected), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("modulated", [False, True])
def test_pack_matches_reference_and_gradcheck(modulated):
    cls = mmops.ModulatedDeformRoIPoolPack if modulated else mmops.DeformRoIPoolPack
    pool = cls((2, 3), 3, deform_fc_channels=8, spatial_scale=0.5, sampling_ratio=2).double()
    _randomize_last_layers(pool, seed=int(modulated))
    torch.manual_seed(5)
    x = torch.randn(2, 3, 6, 7, dtype=torch.float64, requires_grad=True)
    rois = random_rois(4, 2, 6, 7, dtype=torch.float64, spatial_scale=0.5, extra=False)
    out = pool(x, rois)
    flat = deform_roi_pool_reference(x, rois, None, (2, 3), 0.5, 2, 0.1).reshape(4, -1)
    offset = pool.offset_fc(flat).reshape(4, 2, 2, 3)
    exp = deform_roi_pool_reference(x, rois, offset, (2, 3), 0.5, 2, 0.1)
    if modulated:
        exp = exp * pool.mask_fc(flat).reshape(4, 1, 2, 3)
    assert offset.abs().sum() > 0
    torch.testing.assert_close(out, exp, **TOL[torch.float64])
    assert torch.autograd.gradcheck(lambda x: pool(x, rois), (x,), eps=1e-6, atol=1e-6)


def test_pack_rejects_wrong_channels():
    pool = mmops.DeformRoIPoolPack(2, 4, deform_fc_channels=8)
    with pytest.raises(ValueError, match="output_channels"):
        pool(torch.randn(1, 3, 5, 5), torch.tensor([[0, 0, 0, 3, 3.0]]))


def test_modules_script():
    torch.manual_seed(6)
    x = torch.randn(2, 3, 6, 7)
    rois = random_rois(4, 2, 6, 7)
    offset = _offset(4, (2, 2))
    for module, args in (
        (mmops.DeformRoIPool(2, 1.0, 2), (x, rois, offset)),
        (mmops.DeformRoIPoolPack(2, 3, 8), (x, rois)),
        (mmops.ModulatedDeformRoIPoolPack(2, 3, 8), (x, rois)),
    ):
        scripted = torch.jit.script(module)
        torch.testing.assert_close(scripted(*args), module(*args), rtol=0, atol=0)


def test_wrapper_needs_output_size():
    with pytest.raises(ValueError, match="output_size"):
        mmops.deform_roi_pool(torch.randn(1, 1, 4, 4), torch.zeros(1, 5))


# --------------------------------------------------------------------------- special inputs


@pytest.mark.parametrize("ratio", [0, 2])
def test_no_offset_is_roi_align_aligned(ratio):
    torch.manual_seed(7)
    x = torch.randn(2, 4, 13, 11, dtype=torch.float64)
    rois = random_rois(16, 2, 13, 11, dtype=torch.float64, spatial_scale=0.5)
    out = op(x, rois, None, [3, 4], 0.5, ratio, 0.1)
    exp = mmops.roi_align(x, rois, (3, 4), 0.5, ratio, "avg", True)
    torch.testing.assert_close(out, exp, **TOL[torch.float64])
    torch.testing.assert_close(op(x, rois, torch.zeros(16, 2, 3, 4, dtype=torch.float64), [3, 4], 0.5, ratio), out)


def test_non_finite_rois_and_offsets_give_zeros():
    torch.manual_seed(8)
    x = torch.randn(1, 2, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor(
        [[0, 1, 1, 4, 4], [0, math.nan, 1, 4, 4], [0, 1, 1, math.inf, 4], [0, 1, 1, 4, 4]], dtype=torch.float64
    )
    offset = torch.zeros(4, 2, 2, 2, dtype=torch.float64)
    offset[3, 0, 1, 1] = math.nan
    offset[3, 1, 0, 0] = math.inf
    offset.requires_grad_(True)
    out = op(x, rois, offset, [2, 2], 1.0, 2, 0.1)
    assert torch.equal(out[1:3], torch.zeros_like(out[1:3]))
    assert torch.equal(out[3, :, 1, 1], torch.zeros(2, dtype=torch.float64))
    assert torch.equal(out[3, :, 0, 0], torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(out[3, :, 0, 1], out[0, :, 0, 1])
    gx, goff = torch.autograd.grad(out.sum(), (x, offset))
    assert torch.isfinite(gx).all() and torch.isfinite(goff).all()
    assert torch.equal(goff[1:3], torch.zeros_like(goff[1:3]))


def test_far_offsets_leave_the_map():
    x = torch.randn(1, 2, 5, 5, dtype=torch.float64)
    rois = torch.tensor([[0, 0, 0, 4, 4.0]], dtype=torch.float64)
    offset = torch.full((1, 2, 2, 2), 100.0, dtype=torch.float64)
    assert torch.equal(op(x, rois, offset, [2, 2], 1.0, 2, 0.1), torch.zeros(1, 2, 2, 2, dtype=torch.float64))


def test_empty_backward_without_offset():
    x = torch.randn(2, 3, 5, 5, requires_grad=True)
    out = op(x, torch.zeros(0, 5), None, [2, 2], 1.0, 0, 0.1)
    (g,) = torch.autograd.grad(out.sum(), x)
    assert out.shape == (0, 3, 2, 2) and torch.equal(g, torch.zeros_like(x))


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("modulated", [False, True])
def test_cuda_pack_matches_cpu(modulated):
    cls = mmops.ModulatedDeformRoIPoolPack if modulated else mmops.DeformRoIPoolPack
    pool = cls(7, 16, deform_fc_channels=32, spatial_scale=0.25)
    _randomize_last_layers(pool)
    torch.manual_seed(10)
    x = torch.randn(2, 16, 30, 40, requires_grad=True)
    rois = random_rois(50, 2, 30, 40, spatial_scale=0.25)
    xc = x.detach().cuda().requires_grad_(True)
    poolc = copy.deepcopy(pool).cuda()  # pool's CPU graph keeps its own parameters
    out, outc = pool(x, rois), poolc(xc, rois.cuda())
    torch.testing.assert_close(outc.cpu(), out, rtol=1e-4, atol=1e-4)
    go = torch.randn_like(out)
    out.backward(go)
    outc.backward(go.cuda())
    torch.testing.assert_close(xc.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
def test_cuda_invalid_batch_index_pools_zeros():
    x, rois, bad, go = invalid_batch_index_inputs(seed=11)
    offset = _offset(8, (2, 2), device="cuda")
    with strict_index_check(False):
        out, gx, goff = grads_of(x, rois, offset, go, (2, 2), 1.0, 0, 0.1)
    assert torch.equal(out[bad], torch.zeros_like(out[bad]))
    assert torch.equal(goff[bad], torch.zeros_like(goff[bad]))
    good = [i for i in range(8) if i not in bad]
    exp, gxe, goffe = grads_of(x.cpu(), rois[good].cpu(), offset[good].cpu(), go[good].cpu(), (2, 2), 1.0, 0, 0.1)
    torch.testing.assert_close(out[good].cpu(), exp)
    torch.testing.assert_close(gx.cpu(), gxe)
    torch.testing.assert_close(goff[good].cpu(), goffe)


@pytest.mark.cuda
def test_cuda_strict_index_check_raises():
    x = torch.randn(2, 3, 8, 8, device="cuda")
    rois = random_rois(4, 2, 8, 8, device="cuda")
    rois[1, 0] = 2.0
    with strict_index_check(True):
        with pytest.raises(RuntimeError, match="batch index"):
            op(x, rois, None, [2, 2], 1.0, 0, 0.1)


@pytest.mark.cuda
def test_cuda_backward_refuses_deterministic_mode():
    from conftest import deterministic_algorithms

    x = torch.randn(1, 2, 6, 6, device="cuda", requires_grad=True)
    out = op(x, torch.tensor([[0, 0, 0, 4, 4.0]], device="cuda"), None, [2, 2], 1.0, 0, 0.1)
    with deterministic_algorithms():
        with pytest.raises(RuntimeError, match="deterministic"):
            out.sum().backward()


def test_benchmark_composite_matches_reference():
    from deform_roi_pool_reference import deform_roi_pool_composite

    torch.manual_seed(13)
    x = torch.randn(2, 3, 9, 11, dtype=torch.float64, requires_grad=True)
    rois = random_rois(10, 2, 9, 11, dtype=torch.float64, spatial_scale=0.5, extra=False)
    offset = _offset(10, (3, 2), torch.float64, spread=2.0).requires_grad_(True)
    out = deform_roi_pool_composite(x, rois, offset, (3, 2), 0.5, 2, 0.1)
    exp = op(x, rois, offset, [3, 2], 0.5, 2, 0.1)
    torch.testing.assert_close(out, exp, **TOL[torch.float64])
    go = torch.randn_like(out)
    torch.testing.assert_close(
        torch.autograd.grad(out, (x, offset), go), torch.autograd.grad(exp, (x, offset), go), **TOL[torch.float64]
    )


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("low", [torch.float16, torch.bfloat16])
def test_autocast_runs_in_float32(device, low):
    torch.manual_seed(14)
    x = torch.randn(2, 4, 9, 10, device=device).to(low)
    rois = random_rois(6, 2, 9, 10, device=device)  # float32 rois, low-precision features
    offset = _offset(6, (2, 2), torch.float32, device)
    with pytest.raises(RuntimeError, match="rois"):
        op(x, rois, offset, [2, 2], 1.0, 0, 0.1)
    with torch.autocast(device, dtype=low):
        got = op(x, rois, offset.to(low), [2, 2], 1.0, 0, 0.1)
    assert got.dtype == low
    expected = op(x.float(), rois, offset.to(low).float(), [2, 2], 1.0, 0, 0.1)
    assert torch.equal(got, expected.to(low))
