"""Tests of mmops::ms_deform_attn (multi-scale deformable attention) and
mmops.MultiScaleDeformableAttention: the conformance cases, then a float64 grid_sample
reference, known values, gradcheck, special and non-finite inputs, the module and the
CUDA-specific tests."""

import math

import pytest
import torch
import torch.nn.functional as F
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, capture_cuda_graph, deterministic_algorithms, strict_index_check
from ms_deform_attn_reference import reference

import mmops

op = torch.ops.mmops.ms_deform_attn
bwd_op = torch.ops.mmops._ms_deform_attn_backward


def level_tensors(shapes):
    ss = torch.tensor(shapes, dtype=torch.long).view(-1, 2)
    sizes = ss[:, 0] * ss[:, 1]
    starts = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    return ss, starts


def make(B, Q, M, D, shapes, P, dtype=torch.float64, seed=0, lo=-0.15, hi=1.15):
    """value, spatial_shapes, level_start_index, sampling_locations, attention_weights
    (locations uniform in [lo, hi]: some samples fall partly or fully outside)."""
    g = torch.Generator().manual_seed(seed)
    L = len(shapes)
    S = sum(h * w for h, w in shapes)
    value = torch.randn(B, S, M, D, generator=g, dtype=torch.float64)
    loc = lo + (hi - lo) * torch.rand(B, Q, M, L, P, 2, generator=g, dtype=torch.float64)
    attn = torch.rand(B, Q, M, L, P, generator=g, dtype=torch.float64)
    ss, starts = level_tensors(shapes)
    return value.to(dtype), ss, starts, loc.to(dtype), attn.to(dtype)


def interior_locations(B, Q, M, shapes, P, seed=0):
    """Locations whose pixel coordinates stay 0.15 px away from the integers (the
    bilinear weights' kinks), from -1 to W (some samples partly outside)."""
    g = torch.Generator().manual_seed(seed)
    loc = torch.empty(B, Q, M, len(shapes), P, 2, dtype=torch.float64)
    for lvl, (h, w) in enumerate(shapes):
        for axis, size in ((0, w), (1, h)):
            base = torch.randint(-1, size, (B, Q, M, P), generator=g).double()
            frac = 0.15 + 0.7 * torch.rand(B, Q, M, P, generator=g, dtype=torch.float64)
            loc[:, :, :, lvl, :, axis] = (base + frac + 0.5) / size
    return loc


def fwd_bwd(fn, value, ss, starts, loc, attn, go=None):
    leaves = [t.detach().requires_grad_(True) for t in (value, loc, attn)]  # no copy: keeps strides and offsets
    out = fn(leaves[0], ss, starts, leaves[1], leaves[2])
    if go is None:
        go = torch.randn(out.shape, generator=torch.Generator().manual_seed(99), dtype=torch.float64)
        go = go.to(device=out.device, dtype=out.dtype)
    grads = torch.autograd.grad(out, leaves, go)
    return out.detach(), grads, go


def ref_fwd_bwd(value, shapes, loc, attn, go):
    return fwd_bwd(
        lambda v, s, st, lo, a: reference(v, shapes, lo, a),
        value.double(),
        None,
        None,
        loc.double(),
        attn.double(),
        go.double(),
    )[:2]


SHAPE_CASES = [
    # B, Q, M, D, levels, P
    (2, 9, 2, 5, [(6, 7), (3, 4)], 3),  # D not a multiple of 4
    (1, 5, 3, 8, [(1, 9), (5, 1), (4, 4)], 1),  # 1 x W, H x 1, P = 1
    (3, 4, 1, 1, [(2, 3)], 2),  # one level, one channel
    (2, 30, 4, 32, [(10, 15), (5, 8), (3, 4), (2, 2)], 4),  # Deformable-DETR-like
    (1, 7, 2, 36, [(7, 5), (1, 1)], 5),  # 1 x 1 level
]


# --------------------------------------------------------------------------- conformance


def _sample(B, Q, M, D, shapes, P, other=None, seed=17):
    """sample(device, dtype, size): make(...); size 1: other (B, Q, shapes)."""

    def sample(device, dtype, size):
        b, q, lv = (B, Q, shapes) if size == 0 else other
        return Sample(tuple(t.to(device) for t in make(b, q, M, D, lv, P, dtype, seed=seed + size)))

    return sample


def _empty(device, dtype):
    return [
        Sample(tuple(t.to(device) for t in make(B, Q, 2, 3, [(2, 3), (1, 2)], 2, dtype)), out_shapes=[(B, Q, 6)])
        for B, Q in ((0, 5), (2, 0), (0, 0))
    ]


CUDA_TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
}

# (B, Q, M, D, levels, P): vector path with one chunk (D 32), scalar path (D 5, D 1),
# two chunks per lane (D 256), several channel passes (D 520: vector, D 161: scalar)
CUDA_CASES = [
    (2, 50, 8, 32, [(10, 15), (5, 8), (3, 4), (2, 2)], 4),
    (2, 9, 2, 5, [(6, 7), (3, 4)], 3),
    (3, 4, 1, 1, [(2, 3)], 2),
    (1, 6, 2, 256, [(4, 5), (1, 3)], 3),
    (1, 3, 1, 520, [(3, 4), (2, 2)], 2),
    (1, 3, 2, 161, [(3, 4)], 33),
]


def _cuda_samples(dtype):
    for i, (B, Q, M, D, shapes, P) in enumerate(CUDA_CASES):
        yield Sample(make(B, Q, M, D, shapes, P, dtype, seed=30 + i))


def _cuda_tol(dtype, what, expected, sample):
    tol = CUDA_TOL[dtype]
    scale = 20.0 if what == "grad sampling_locations" else 1.0  # W * a sum over channels
    return dict(rtol=tol["rtol"], atol=tol["atol"] * scale)


def _randomise(m, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.3)


class _Net(torch.nn.Module):
    """ms_deform_attn in a model: the op on computed inputs, the functional wrapper and
    MultiScaleDeformableAttention (self-attention of the flattened value, reference points
    from the sampling locations); 2 heads of 8 channels, 3 levels."""

    def __init__(self):
        super().__init__()
        self.attn = mmops.MultiScaleDeformableAttention(
            embed_dims=16, num_heads=2, num_levels=3, num_points=2, dropout=0.0, batch_first=True
        )
        _randomise(self.attn, 16)

    def forward(
        self, value: torch.Tensor, ss: torch.Tensor, starts: torch.Tensor, loc: torch.Tensor, attn: torch.Tensor
    ):
        out = torch.ops.mmops.ms_deform_attn(value * 1.5, ss, starts, loc, attn.softmax(-1))
        computed = out.sin() + mmops.ms_deform_attn(value, ss, starts, loc.clamp(0, 1), attn)
        flat = value.flatten(2)
        module = self.attn(
            flat[:, : loc.shape[1]],
            value=flat,
            reference_points=loc[:, :, 0, :, 0, :].clamp(0, 1),
            spatial_shapes=ss,
            level_start_index=starts,
        )
        return computed, module


def _helpers(sample):
    go = torch.randn_like(op(*sample.args))
    return [(bwd_op, (go, *sample.args))]


def _good():
    return make(2, 3, 2, 4, [(3, 4), (2, 2)], 2, torch.float32)


# name: (make(value, spatial_shapes, level_start_index, loc, attn) -> arguments, message)
BAD = {
    "value_3d": (lambda v, s, st, lo, a: (v[0], s, st, lo, a), "expected value to be a 4-D tensor"),
    "int_value": (lambda v, s, st, lo, a: (v.int(), s, st, lo.int(), a.int()), "floating point dtype"),
    "head_dim_0": (lambda v, s, st, lo, a: (v[..., :0], s, st, lo, a), "head_dim >= 1"),
    "shapes_1d": (lambda v, s, st, lo, a: (v, s[:, 0], st, lo, a), "spatial_shapes to be a 2-D tensor"),
    "shapes_3_cols": (
        lambda v, s, st, lo, a: (v, torch.cat([s, s[:, :1]], 1), st, lo, a),
        "spatial_shapes to be a 2-D tensor",
    ),
    "shapes_int32": (lambda v, s, st, lo, a: (v, s.int(), st, lo, a), "spatial_shapes to be an int64 tensor"),
    "shapes_float": (lambda v, s, st, lo, a: (v, s.float(), st, lo, a), "spatial_shapes to be an int64"),
    "no_levels": (lambda v, s, st, lo, a: (v, s[:0], st[:0], lo[:, :, :, :0], a[:, :, :, :0]), "1 to 1024 levels"),
    "starts_2d": (lambda v, s, st, lo, a: (v, s, st[None], lo, a), "level_start_index to be a 1-D tensor"),
    "starts_length": (lambda v, s, st, lo, a: (v, s, st[:1], lo, a), "one start per level"),
    "starts_int32": (lambda v, s, st, lo, a: (v, s, st.int(), lo, a), "level_start_index to be an int64"),
    "loc_5d": (lambda v, s, st, lo, a: (v, s, st, lo[..., 0], a), "sampling_locations to be a 6-D tensor"),
    "loc_last_3": (
        lambda v, s, st, lo, a: (v, s, st, torch.cat([lo, lo[..., :1]], -1), a),
        "sampling_locations to be a 6-D tensor",
    ),
    "loc_batch": (lambda v, s, st, lo, a: (v, s, st, lo[:1], a[:1]), "batch size of value"),
    "loc_heads": (lambda v, s, st, lo, a: (v, s, st, lo[:, :, :1], a[:, :, :1]), "num_heads of value"),
    "loc_levels": (lambda v, s, st, lo, a: (v, s, st, lo[:, :, :, :1], a[:, :, :, :1]), "one entry per level"),
    "no_points": (lambda v, s, st, lo, a: (v, s, st, lo[:, :, :, :, :0], a[:, :, :, :, :0]), "num_points >= 1"),
    "attn_4d": (lambda v, s, st, lo, a: (v, s, st, lo, a[..., 0]), "attention_weights to be a 5-D tensor"),
    "attn_points": (lambda v, s, st, lo, a: (v, s, st, lo, a[..., :1]), "expected attention_weights of shape"),
    "attn_queries": (lambda v, s, st, lo, a: (v, s, st, lo, a[:, :2]), "expected attention_weights of shape"),
    "loc_dtype": (lambda v, s, st, lo, a: (v, s, st, lo.double(), a), "sampling_locations to have the dtype of value"),
    "attn_dtype": (lambda v, s, st, lo, a: (v, s, st, lo, a.half()), "attention_weights to have the dtype of value"),
    "rows_mismatch": (lambda v, s, st, lo, a: (v[:, :-1], s, st, lo, a), "cover value.size\\(1\\) = 15 rows"),
    "rows_too_few": (lambda v, s, st, lo, a: (torch.cat([v, v], 1), s, st, lo, a), "sum\\(H \\* W\\) = 16"),
    "negative_size": (lambda v, s, st, lo, a: (v, torch.tensor([[-3, -4], [2, 2]]), st, lo, a), "\\(H, W\\) >= 0"),
    "bad_start": (lambda v, s, st, lo, a: (v, s, torch.tensor([0, 11]), lo, a), "running sum of H \\* W"),
    "first_start": (lambda v, s, st, lo, a: (v, s, torch.tensor([1, 13]), lo, a), "running sum of H \\* W"),
    "level_too_big": (
        lambda v, s, st, lo, a: (v, torch.tensor([[3, 4], [2, 3]]), st, lo, a),
        "levels up to 1 hold more",
    ),
    "huge_level": (
        lambda v, s, st, lo, a: (v, torch.tensor([[3, 4], [2**40, 2**40]]), st, lo, a),
        "levels up to 1 hold more",
    ),
}
# checked in the kernels (they read the level table): not on meta tensors
_DATA_CHECKS = (
    "rows_mismatch",
    "rows_too_few",
    "negative_size",
    "bad_start",
    "first_start",
    "level_too_big",
    "huge_level",
)

BAD_INPUTS = {
    **{
        name: BadInput(
            lambda *_, make=make_args: make(*_good()),
            f"mmops::ms_deform_attn: .*{match}",
            meta=name not in _DATA_CHECKS,
        )
        for name, (make_args, match) in BAD.items()
    },
    "spatial_shapes_on_cpu": BadInput(
        lambda *_: _on_cuda(_good(), keep=1), "spatial_shapes on the device of value", cuda=True
    ),
    "sampling_locations_on_cpu": BadInput(
        lambda *_: _on_cuda(_good(), keep=3), "sampling_locations on the device of value", cuda=True
    ),
}


def _on_cuda(args, keep):
    return tuple(t if i == keep else t.cuda() for i, t in enumerate(args))


CONFORMANCE = [
    ConformanceCase(
        "ms_deform_attn",
        op,
        _sample(4, 5, 2, 8, [(3, 4), (2, 5), (1, 3)], 6, (3, 7, [(4, 3), (1, 5), (2, 2)]), seed=18),
        grad_args=(0, 3, 4),
        empty=_empty,
        bad_inputs=BAD_INPUTS,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cuda_tol=_cuda_tol,
        script_grad_tol=dict(rtol=1e-5, atol=1e-6),
    ),
    ConformanceCase(
        "ms_deform_attn_float64",
        op,
        _sample(2, 5, 2, 3, [(3, 4), (2, 2)], 2),
        dtype=torch.float64,
        dtypes=(),
        grad_args=(0, 3, 4),
        empty=_empty,
        helpers=_helpers,
    ),
]


class TestMsDeformAttnConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("case", range(len(SHAPE_CASES)))
def test_matches_reference(case, dtype):
    B, Q, M, D, shapes, P = SHAPE_CASES[case]
    value, ss, starts, loc, attn = make(B, Q, M, D, shapes, P, dtype, seed=case)
    out, grads, go = fwd_bwd(op, value, ss, starts, loc, attn)
    exp, gexp = ref_fwd_bwd(value, shapes, loc, attn, go)
    assert out.shape == (B, Q, M * D) and out.dtype == dtype
    tol = TOL[dtype] if dtype == torch.float64 else dict(rtol=1e-5, atol=2e-5)
    torch.testing.assert_close(out.double(), exp, **tol)
    for g, e, name in zip(grads, gexp, ("value", "sampling_locations", "attention_weights")):
        assert g.dtype == dtype, name
        # the location gradient is W (or H) times a sum over channels
        scale = 1.0 if name != "sampling_locations" else 20.0
        torch.testing.assert_close(g.double(), e, rtol=tol["rtol"], atol=tol["atol"] * scale, msg=name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_matches_reference(dtype):
    B, Q, M, D, shapes, P = SHAPE_CASES[3]
    value, ss, starts, loc, attn = make(B, Q, M, D, shapes, P, dtype, seed=5, lo=0.0, hi=1.0)
    out, grads, go = fwd_bwd(op, value, ss, starts, loc, attn)
    exp, gexp = ref_fwd_bwd(value, shapes, loc, attn, go)
    # the reference sees the same rounded inputs: only the output rounding and
    # the float accumulation differ
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out.double(), exp, rtol=2 * eps, atol=2 * eps * exp.abs().max().item())
    for g, e in zip(grads, gexp):
        assert g.dtype == dtype
        torch.testing.assert_close(g.double(), e, rtol=2 * eps, atol=2 * eps * e.abs().max().item())


def test_known_values():
    # Level 0: 2 x 2 map [[1, 2], [3, 4]] (row-major rows 0..3), level 1: 1 x 1 map [10].
    value = torch.tensor([1.0, 2.0, 3.0, 4.0, 10.0], dtype=torch.float64).view(1, 5, 1, 1)
    ss, starts = level_tensors([(2, 2), (1, 1)])
    # (x, y) normalised; pixel = u * size - 0.5
    loc = torch.tensor(
        [
            [[0.5, 0.5], [0.25, 0.25]],  # level 0: pixel (0.5, 0.5) -> 2.5, (0, 0) -> 1
            [[0.5, 0.5], [0.9, 0.5]],
        ],  # level 1: pixel (0, 0) -> 10, (0.4, 0) -> 6
        dtype=torch.float64,
    ).view(1, 1, 1, 2, 2, 2)
    attn = torch.tensor([[2.0, 1.0], [0.5, 0.25]], dtype=torch.float64).view(1, 1, 1, 2, 2)
    # 2 * 2.5 + 1 * 1 + 0.5 * 10 + 0.25 * 0.6 * 10
    expected = 2 * 2.5 + 1.0 + 5.0 + 1.5
    out, (gv, gl, ga), _ = fwd_bwd(op, value, ss, starts, loc, attn, torch.ones(1, 1, 1, dtype=torch.float64))
    assert out.item() == pytest.approx(expected, rel=1e-14)
    # d/d attention = the samples
    torch.testing.assert_close(ga.view(-1), torch.tensor([2.5, 1.0, 10.0, 6.0], dtype=torch.float64))
    # level 0 point 0: d/dx = (2 - 1 + 4 - 3) / 2 = 1 per pixel -> * W * a = 2 * 2;
    # d/dy = (3 - 1 + 4 - 2) / 2 = 2 per pixel -> * H * a = 2 * 2 * 2.
    # point 1 (pixel (0, 0), at the neighbour (0, 0) itself): d/dx = 2 - 1 = 1 -> * 2 * 1; d/dy = 3 - 1 -> * 2.
    # level 1 (1 x 1): pixel (0, 0) -> d/dx = 0 - 10 (right neighbour outside) -> * 1 * 0.5;
    #   d/dy likewise; pixel (0.4, 0): d/dx = -10 * 1 * 0.25, d/dy = -10 * 0.6 * 0.25.
    exp_gl = torch.tensor([[4.0, 8.0], [2.0, 4.0], [-5.0, -5.0], [-2.5, -1.5]], dtype=torch.float64)
    torch.testing.assert_close(gl.view(4, 2), exp_gl)
    # grad value: a * bilinear weight summed over the points
    exp_gv = torch.tensor([2 * 0.25 + 1.0, 2 * 0.25, 2 * 0.25, 2 * 0.25, 0.5 + 0.25 * 0.6], dtype=torch.float64)
    torch.testing.assert_close(gv.view(-1), exp_gv)
    # the reference agrees
    torch.testing.assert_close(
        reference(value, [(2, 2), (1, 1)], loc, attn).view(()), torch.tensor(expected, dtype=torch.float64)
    )


def test_gradcheck():
    shapes = [(3, 4), (2, 2), (1, 3)]
    value, ss, starts, _, attn = make(2, 3, 2, 3, shapes, 2, seed=7)
    loc = interior_locations(2, 3, 2, shapes, 2, seed=7)
    inputs = (value.requires_grad_(True), ss, starts, loc.requires_grad_(True), attn.requires_grad_(True))
    assert torch.autograd.gradcheck(op, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
    # the reference is differentiable the same way
    grads = torch.autograd.grad(op(*inputs).sum(), (value, loc, attn))
    ref = torch.autograd.grad(reference(value, shapes, loc, attn).sum(), (value, loc, attn))
    for g, r in zip(grads, ref):
        torch.testing.assert_close(g, r)


def test_double_backward_raises():
    value, ss, starts, loc, attn = make(1, 2, 1, 2, [(2, 3)], 1)
    value.requires_grad_(True)
    out = op(value, ss, starts, loc, attn)
    (g,) = torch.autograd.grad(out.sum(), value, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(out, value, torch.ones_like(out).requires_grad_(True), create_graph=True)


def test_samples_outside_are_zero():
    value, ss, starts, loc, attn = make(1, 4, 1, 3, [(3, 3)], 4, seed=8)
    # pixel <= -1 or >= W / H: the whole sample is outside
    loc[0, :, 0, 0, :, :] = torch.tensor(
        [[-1.0 / 6, 0.5], [0.5, 7.0 / 6], [2.0, 2.0], [-3.0, 0.4]], dtype=torch.float64
    )
    out, grads, _ = fwd_bwd(op, value, ss, starts, loc, attn)
    assert torch.equal(out, torch.zeros_like(out))
    for g in grads:
        assert torch.equal(g, torch.zeros_like(g))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonfinite_location_is_worth_zero(bad):
    shapes = [(4, 5), (2, 3)]
    value, ss, starts, loc, attn = make(2, 3, 2, 4, shapes, 2, seed=9)
    loc_bad = loc.clone()
    loc_bad[1, 2, 0, 1, 0, 0] = bad  # x of one point
    loc_bad[0, 0, 1, 0, 1, 1] = bad  # y of another
    out, (gv, gl, ga), go = fwd_bwd(op, value, ss, starts, loc_bad, attn)
    # the same as moving those points far outside the maps
    loc_out = loc.clone()
    loc_out[1, 2, 0, 1, 0, 0] = -10.0
    loc_out[0, 0, 1, 0, 1, 1] = -10.0
    exp, (ev, el, ea) = ref_fwd_bwd(value, shapes, loc_out, attn, go)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, exp)
    torch.testing.assert_close(gv, ev)
    torch.testing.assert_close(ga, ea)
    assert gl[1, 2, 0, 1, 0].abs().sum() == 0 and gl[0, 0, 1, 0, 1].abs().sum() == 0
    torch.testing.assert_close(gl, el)


def test_nan_value_reaches_only_the_samples_that_use_its_pixel():
    value, ss, starts, _, attn = make(1, 2, 1, 2, [(2, 2)], 1)
    value[0, 3, 0, 0] = math.nan  # pixel (1, 1), channel 0
    loc = torch.tensor([0.25, 0.25, 0.75, 0.75], dtype=torch.float64).view(1, 2, 1, 1, 1, 2)
    out = op(value, ss, starts, loc, attn)  # query 0 samples pixel (0, 0) exactly, query 1 pixel (1, 1)
    assert torch.isfinite(out[0, 0]).all()
    assert math.isnan(out[0, 1, 0].item()) and math.isfinite(out[0, 1, 1].item())


def test_empty_levels():
    # a 0 x W level holds no rows and is worth 0
    value, ss, starts, loc, attn = make(1, 3, 1, 2, [(0, 4), (2, 2)], 2, seed=10)
    assert starts.tolist() == [0, 0]
    out, grads, go = fwd_bwd(op, value, ss, starts, loc, attn)
    exp, (ev, el, ea) = ref_fwd_bwd(value, [(2, 2)], loc[:, :, :, 1:], attn[:, :, :, 1:], go)
    torch.testing.assert_close(out, exp)
    torch.testing.assert_close(grads[0], ev)
    assert torch.equal(grads[1][:, :, :, 0], torch.zeros_like(grads[1][:, :, :, 0]))
    assert torch.equal(grads[2][:, :, :, 0], torch.zeros_like(grads[2][:, :, :, 0]))


def test_noncontiguous_inputs():
    shapes = [(3, 5), (2, 2)]
    value, ss, starts, loc, attn = make(2, 4, 3, 4, shapes, 2, seed=11)
    exp, gexp, go = fwd_bwd(op, value, ss, starts, loc, attn)
    value_nc = value.transpose(1, 2).contiguous().transpose(1, 2)  # heads outer in memory
    loc_nc = loc.permute(5, 0, 1, 2, 3, 4).contiguous().permute(1, 2, 3, 4, 5, 0)
    attn_nc = attn.transpose(0, 1).contiguous().transpose(0, 1)
    ss_nc = ss.t().contiguous().t()
    starts_nc = torch.stack([starts, starts], 1)[:, 1]
    go_nc = go.transpose(0, 1).contiguous().transpose(0, 1)
    for t in (value_nc, loc_nc, attn_nc, ss_nc, starts_nc, go_nc):
        assert not t.is_contiguous()
    out, grads, _ = fwd_bwd(op, value_nc, ss_nc, starts_nc, loc_nc, attn_nc, go_nc)
    torch.testing.assert_close(out, exp, rtol=0, atol=0)
    for g, e in zip(grads, gexp):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_cpu_backward_does_not_depend_on_threads():
    value, ss, starts, loc, attn = make(2, 40, 4, 8, [(6, 6), (3, 3)], 4, torch.float32, seed=12)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = fwd_bwd(op, value, ss, starts, loc, attn)
        torch.set_num_threads(max(2, before))
        b = fwd_bwd(op, value, ss, starts, loc, attn)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(a[0], b[0])
    for u, v in zip(a[1], b[1]):
        assert torch.equal(u, v)


# --------------------------------------------------------------------------- errors


def test_backward_helper_checks():
    value, ss, starts, loc, attn = _good()
    go = torch.randn(2, 3, 8)
    gv, gl, ga = bwd_op(go, value, ss, starts, loc, attn)
    assert gv.shape == value.shape and gl.shape == loc.shape and ga.shape == attn.shape
    with pytest.raises(RuntimeError, match="grad_output of shape \\[2, 3, 8\\]"):
        bwd_op(go[:, :, :7], value, ss, starts, loc, attn)
    with pytest.raises(RuntimeError, match="grad_output to be a 3-D tensor"):
        bwd_op(go[0], value, ss, starts, loc, attn)
    with pytest.raises(RuntimeError, match="grad_output to have the dtype of value"):
        bwd_op(go.double(), value, ss, starts, loc, attn)
    with pytest.raises(RuntimeError, match="running sum"):
        bwd_op(go, value, ss, torch.tensor([0, 3]), loc, attn)


# --------------------------------------------------------------------------- Python API


def test_functional_wrapper():
    value, ss, starts, loc, attn = make(2, 5, 2, 3, [(3, 3), (2, 1)], 2, torch.float32, seed=13)
    out = mmops.ms_deform_attn(value, ss, starts, loc, attn)
    torch.testing.assert_close(out, op(value, ss, starts, loc, attn), rtol=0, atol=0)


def module_reference(m, query, value, reference_points, shapes, identity=None, query_pos=None, key_padding_mask=None):
    """mmcv's MultiScaleDeformableAttention.forward with the float64 reference
    as the core op (written out here independently of mmops)."""
    ss = torch.tensor(shapes, dtype=torch.float64)
    if value is None:
        value = query
    if identity is None:
        identity = query
    if query_pos is not None:
        query = query + query_pos
    if not m.batch_first:
        query, value = query.transpose(0, 1), value.transpose(0, 1)
    B, Q, _ = query.shape
    S = value.shape[1]
    value = F.linear(value, m.value_proj.weight, m.value_proj.bias)
    if key_padding_mask is not None:
        value = torch.where(key_padding_mask[..., None], torch.zeros_like(value), value)
    value = value.view(B, S, m.num_heads, -1)
    off = F.linear(query, m.sampling_offsets.weight, m.sampling_offsets.bias)
    off = off.view(B, Q, m.num_heads, m.num_levels, m.num_points, 2)
    w = F.linear(query, m.attention_weights.weight, m.attention_weights.bias)
    w = torch.softmax(w.view(B, Q, m.num_heads, -1), -1).view(B, Q, m.num_heads, m.num_levels, m.num_points)
    if reference_points.shape[-1] == 2:
        norm = torch.stack([ss[:, 1], ss[:, 0]], -1)
        loc = reference_points[:, :, None, :, None, :] + off / norm[None, None, None, :, None, :]
    else:
        loc = (
            reference_points[:, :, None, :, None, :2]
            + off / m.num_points * reference_points[:, :, None, :, None, 2:] * 0.5
        )
    out = F.linear(reference(value, shapes, loc, w), m.output_proj.weight, m.output_proj.bias)
    if not m.batch_first:
        out = out.transpose(0, 1)
    return out + identity


def test_module_init_matches_mmcv():
    m = mmops.MultiScaleDeformableAttention()
    assert (m.embed_dims, m.num_heads, m.num_levels, m.num_points, m.batch_first) == (256, 8, 4, 4, False)
    assert m.im2col_step == 64 and m.dropout.p == 0.1
    names = {n: tuple(p.shape) for n, p in m.named_parameters()}
    assert names == {
        "sampling_offsets.weight": (256, 256),
        "sampling_offsets.bias": (256,),
        "attention_weights.weight": (128, 256),
        "attention_weights.bias": (128,),
        "value_proj.weight": (256, 256),
        "value_proj.bias": (256,),
        "output_proj.weight": (256, 256),
        "output_proj.bias": (256,),
    }
    assert torch.equal(m.sampling_offsets.weight, torch.zeros(256, 256))
    bias = m.sampling_offsets.bias.view(8, 4, 4, 2)
    # head h looks along angle 2 pi h / 8, scaled so that the larger component is 1; point i at i + 1
    for h in range(8):
        t = 2 * math.pi * h / 8
        d = torch.tensor([math.cos(t), math.sin(t)])
        d = d / d.abs().max()
        for i in range(4):
            torch.testing.assert_close(bias[h, 2, i], d * (i + 1))
    assert torch.equal(m.attention_weights.weight, torch.zeros(128, 256))
    assert torch.equal(m.attention_weights.bias, torch.zeros(128))
    assert torch.equal(m.value_proj.bias, torch.zeros(256)) and torch.equal(m.output_proj.bias, torch.zeros(256))
    bound = math.sqrt(6.0 / (256 + 256))  # xavier uniform
    assert m.value_proj.weight.abs().max() <= bound and m.value_proj.weight.std() > bound / 3
    with pytest.raises(ValueError, match="divisible"):
        mmops.MultiScaleDeformableAttention(embed_dims=30, num_heads=8)
    with pytest.warns(UserWarning, match="power of 2"):
        mmops.MultiScaleDeformableAttention(embed_dims=24, num_heads=8)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("ref_dim", [2, 4])
def test_module_matches_reference(batch_first, ref_dim):
    shapes = [(4, 5), (2, 3)]
    S = sum(h * w for h, w in shapes)
    B, C = 2, 16
    m = mmops.MultiScaleDeformableAttention(
        embed_dims=C, num_heads=4, num_levels=2, num_points=3, dropout=0.0, batch_first=batch_first
    ).double()
    _randomise(m, 14)
    g = torch.Generator().manual_seed(15)
    value = torch.randn(B, S, C, generator=g, dtype=torch.float64)
    query = torch.randn(B, 7, C, generator=g, dtype=torch.float64)
    query_pos = torch.randn(B, 7, C, generator=g, dtype=torch.float64)
    ref = torch.rand(B, 7, 2, ref_dim, generator=g, dtype=torch.float64)
    mask = torch.rand(B, S, generator=g) < 0.2
    if not batch_first:
        value, query, query_pos = value.transpose(0, 1), query.transpose(0, 1), query_pos.transpose(0, 1)
    ss = torch.tensor(shapes)
    out = m(
        query,
        value=value,
        query_pos=query_pos,
        key_padding_mask=mask,
        reference_points=ref,
        spatial_shapes=ss,
        level_start_index=level_tensors(shapes)[1],
    )
    exp = module_reference(m, query, value, ref, shapes, query_pos=query_pos, key_padding_mask=mask)
    torch.testing.assert_close(out, exp)
    # level_start_index defaults to the running sum; value defaults to query (self-attention)
    q_self = value
    out2 = m(q_self, reference_points=torch.rand(B, S, 2, ref_dim, generator=g, dtype=torch.float64), spatial_shapes=ss)
    assert out2.shape == q_self.shape
    # gradients reach every parameter
    loss = m(query, value=value, reference_points=ref, spatial_shapes=ss).square().sum()
    loss.backward()
    for n, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, n


def test_module_low_precision_locations_cast():
    # float32 reference points with a bfloat16 module: the op sees one dtype
    m = (
        mmops.MultiScaleDeformableAttention(embed_dims=16, num_heads=2, num_levels=1, num_points=2, batch_first=True)
        .to(torch.bfloat16)
        .eval()
    )
    q = torch.randn(1, 6, 16).to(torch.bfloat16)
    out = m(q, reference_points=torch.rand(1, 6, 1, 2), spatial_shapes=torch.tensor([[2, 3]]))
    assert out.dtype == torch.bfloat16 and out.shape == (1, 6, 16)


class _SequenceFirstNet(torch.nn.Module):
    """MultiScaleDeformableAttention in its default layout (batch_first=False)."""

    def __init__(self):
        super().__init__()
        self.attn = mmops.MultiScaleDeformableAttention(
            embed_dims=16, num_heads=2, num_levels=2, num_points=2, dropout=0.0
        )

    def forward(
        self,
        query: torch.Tensor,
        reference_points: torch.Tensor,
        spatial_shapes: torch.Tensor,
        level_start_index: torch.Tensor,
    ) -> torch.Tensor:
        return self.attn(
            query, reference_points=reference_points, spatial_shapes=spatial_shapes, level_start_index=level_start_index
        )


def test_torchscript_sequence_first_module_and_wrapper(tmp_path):
    torch.manual_seed(16)
    net = _SequenceFirstNet()
    _randomise(net, 16)
    shapes = [(3, 4), (2, 2)]
    ss, starts = level_tensors(shapes)
    query = torch.randn(16, 2, 16)
    ref = torch.rand(2, 16, 2, 2)
    sm = torch.jit.script(net)
    path = str(tmp_path / "msda.pt")
    sm.save(path)
    loaded = torch.jit.load(path)
    qe, ql = query.clone().requires_grad_(True), query.clone().requires_grad_(True)
    exp = net(qe, ref, ss, starts)
    out = loaded(ql, ref, ss, starts)
    torch.testing.assert_close(out, exp, rtol=0, atol=0)
    exp.sum().backward()
    out.sum().backward()
    # the scripted graph's autodiff of the linear layers may sum in another order
    torch.testing.assert_close(ql.grad, qe.grad, rtol=1e-5, atol=1e-6)
    # the functional wrapper scripts too
    fn = torch.jit.script(mmops.ms_deform_attn)
    value, _, _, loc, attn = make(2, 3, 2, 4, shapes, 2, torch.float32)
    torch.testing.assert_close(fn(value, ss, starts, loc, attn), op(value, ss, starts, loc, attn), rtol=0, atol=0)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cuda_misaligned_value_takes_scalar_path(dtype):
    B, Q, M, D, shapes, P = 2, 7, 2, 8, [(3, 4), (2, 2)], 2
    value, ss, starts, loc, attn = make(B, Q, M, D, shapes, P, dtype, seed=40)
    flat = torch.empty(value.numel() + 1, dtype=dtype)
    shifted = flat[1:].view(value.shape)  # data pointer off the 16-byte grid, still contiguous
    shifted.copy_(value)
    exp, gexp, go = fwd_bwd(op, value, ss, starts, loc, attn)
    flat_cuda = flat.cuda()
    shifted_cuda = flat_cuda[1:].view(value.shape)
    assert shifted_cuda.is_contiguous() and shifted_cuda.data_ptr() % 16 != 0
    out, grads, _ = fwd_bwd(op, shifted_cuda, ss.cuda(), starts.cuda(), loc.cuda(), attn.cuda(), go.cuda())
    tol = CUDA_TOL[dtype]
    torch.testing.assert_close(out.cpu(), exp, **tol)
    for g, e in zip(grads, gexp):
        torch.testing.assert_close(g.cpu(), e, rtol=tol["rtol"], atol=tol["atol"] * 20)


@pytest.mark.cuda
def test_cuda_gradcheck():
    shapes = [(3, 4), (2, 2), (1, 3)]
    value, ss, starts, _, attn = make(2, 3, 2, 4, shapes, 2, seed=41)
    loc = interior_locations(2, 3, 2, shapes, 2, seed=41)
    inputs = (
        value.cuda().requires_grad_(True),
        ss.cuda(),
        starts.cuda(),
        loc.cuda().requires_grad_(True),
        attn.cuda().requires_grad_(True),
    )
    # the value gradient is summed with atomics: its last bits vary run to run
    assert torch.autograd.gradcheck(op, inputs, eps=1e-6, atol=1e-7, rtol=1e-5, nondet_tol=1e-12)


@pytest.mark.cuda
def test_cuda_nonfinite():
    value, ss, starts, loc, attn = make(2, 5, 2, 4, [(3, 4), (2, 2)], 2, torch.float32, seed=42)
    loc[0, 1, 1, 0, 1, 0] = math.nan
    loc[1, 4, 0, 1, 0, 1] = math.inf
    exp, gexp, go = fwd_bwd(op, value, ss, starts, loc, attn)
    out, grads, _ = fwd_bwd(op, value.cuda(), ss.cuda(), starts.cuda(), loc.cuda(), attn.cuda(), go.cuda())
    assert torch.isfinite(out).all() and all(torch.isfinite(g).all() for g in grads)
    torch.testing.assert_close(out.cpu(), exp, **CUDA_TOL[torch.float32])
    for g, e in zip(grads, gexp):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-5, atol=1e-4)


@pytest.mark.cuda
def test_cuda_inconsistent_levels_are_guarded():
    # outside strict mode the CUDA kernels do not read the level table on the host:
    # a level whose rows would fall outside value contributes 0 and gets no gradient
    shapes = [(3, 4), (2, 2)]
    value, ss, starts, loc, attn = make(2, 5, 2, 4, shapes, 2, torch.float64, seed=43)
    attn0 = attn.clone()
    attn0[:, :, :, 1] = 0
    exp, gexp, go = fwd_bwd(op, value, ss, starts, loc, attn0)
    bad_tables = [
        (torch.tensor([[3, 4], [2, 3]]), starts),  # level 1 runs past the end
        (ss, torch.tensor([0, 13])),  # level 1 starts too late
        (torch.tensor([[3, 4], [-2, -2]]), starts),  # negative sizes
        (torch.tensor([[3, 4], [2**40, 2**40]]), starts),  # H * W overflows int64 arithmetic
        (ss, torch.tensor([0, -1])),  # negative start
    ]
    with strict_index_check(False):
        for bad_ss, bad_starts in bad_tables:
            out, grads, _ = fwd_bwd(
                op, value.cuda(), bad_ss.cuda(), bad_starts.cuda(), loc.cuda(), attn.cuda(), go.cuda()
            )
            torch.testing.assert_close(out.cpu(), exp)
            torch.testing.assert_close(grads[0].cpu(), gexp[0])
            assert torch.equal(grads[1][:, :, :, 1].cpu(), torch.zeros_like(gexp[1][:, :, :, 1]))
            assert torch.equal(grads[2][:, :, :, 1].cpu(), torch.zeros_like(gexp[2][:, :, :, 1]))
            torch.testing.assert_close(grads[1][:, :, :, 0].cpu(), gexp[1][:, :, :, 0])
            torch.testing.assert_close(grads[2][:, :, :, 0].cpu(), gexp[2][:, :, :, 0])


@pytest.mark.cuda
def test_cuda_strict_check_raises():
    value, ss, starts, loc, attn = make(2, 5, 2, 4, [(3, 4), (2, 2)], 2, torch.float32, seed=44)
    args = [t.cuda() for t in (value, ss, starts, loc, attn)]
    with strict_index_check(True):
        op(*args)  # consistent levels pass
        with pytest.raises(RuntimeError, match="cover value.size"):
            op(args[0], torch.tensor([[3, 4], [2, 3]], device="cuda"), args[2], args[3], args[4])
        with pytest.raises(RuntimeError, match="running sum"):
            op(args[0], args[1], torch.tensor([0, 11], device="cuda"), args[3], args[4])
        with pytest.raises(RuntimeError, match="running sum"):
            bwd_op(
                torch.ones(2, 5, 8, device="cuda"),
                args[0],
                args[1],
                torch.tensor([0, 11], device="cuda"),
                args[3],
                args[4],
            )


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_deterministic_mode_raises(dtype):
    value, ss, starts, loc, attn = make(1, 4, 2, 8, [(3, 4)], 2, dtype, seed=45)
    args = [t.cuda() for t in (value, ss, starts, loc, attn)]
    with deterministic_algorithms():
        out = op(*args)  # the forward is deterministic
        leaves = [args[0].requires_grad_(True)]
        out = op(leaves[0], *args[1:])
        with pytest.raises(RuntimeError, match="_ms_deform_attn_backward"):
            out.sum().backward()


@pytest.mark.cuda
def test_cuda_graph_capture():
    value, ss, starts, loc, attn = make(2, 20, 4, 16, [(6, 8), (3, 4)], 4, torch.float32, seed=46)
    args = [t.cuda() for t in (value, ss, starts, loc, attn)]
    with strict_index_check(True):  # skipped while capturing
        g, static_out = capture_cuda_graph(lambda: op(*args), warmups=1)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_out.cpu(), op(value, ss, starts, loc, attn), **CUDA_TOL[torch.float32])


@pytest.mark.cuda
def test_cuda_module_matches_cpu():
    m = mmops.MultiScaleDeformableAttention(
        embed_dims=64, num_heads=8, num_levels=2, num_points=4, dropout=0.0, batch_first=True
    )
    _randomise(m, 47)
    m = m.float()
    shapes = [(6, 8), (3, 4)]
    S = sum(h * w for h, w in shapes)
    q = torch.randn(2, S, 64)
    ref = torch.rand(2, S, 2, 2)
    ss = torch.tensor(shapes)
    exp = m(q, reference_points=ref, spatial_shapes=ss)
    out = m.cuda()(q.cuda(), reference_points=ref.cuda(), spatial_shapes=ss.cuda())
    torch.testing.assert_close(out.cpu(), exp, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- hardening (issue 11)


def _inf_weight_case(bad, dtype=torch.float64):
    """One 3x3 level, D = 2; query q's single point has weight `bad` (inf, -inf or
    nan) at: q0 between pixels, q1 a pixel centre, q2 outside the map, q3 between
    four zero pixels; q4 has a finite weight outside the map."""
    value = torch.tensor(
        [[1.0, -1.0], [-2.0, 2.0], [3.0, 0.5], [4.0, 4.0], [0.0, 0.0], [0.0, 0.0], [7.0, 1.0], [0.0, 0.0], [0.0, 0.0]],
        dtype=torch.float64,
    ).view(1, 9, 1, 2)
    ss, starts = level_tensors([(3, 3)])
    # (x, y) normalised: pixel = u * 3 - 0.5
    pixels = [(1.25, 0.25), (0.0, 1.0), (-4.0, 1.0), (1.5, 1.5), (-4.0, -4.0)]
    loc = torch.tensor([[(x + 0.5) / 3, (y + 0.5) / 3] for x, y in pixels], dtype=torch.float64).view(1, 5, 1, 1, 1, 2)
    attn = torch.tensor([bad, bad, bad, bad, 0.5], dtype=torch.float64).view(1, 5, 1, 1, 1)
    return value.to(dtype), ss, starts, loc.to(dtype), attn.to(dtype)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_nonfinite_attention_weight_is_ieee_times_the_sample(bad):
    value, ss, starts, loc, attn = _inf_weight_case(bad)
    out = op(value, ss, starts, loc, attn)
    # the grid_sample composite: weight * sample, a sample outside being 0 (inf * 0 = NaN)
    exp = reference(value, [(3, 3)], loc, attn)
    torch.testing.assert_close(out, exp, equal_nan=True)  # inf / NaN at the same places
    o = out[0]
    if not math.isnan(bad):
        sample = torch.tensor([0.5625 * -2.0 + 0.1875 * 3.0, 0.5625 * 2.0 + 0.1875 * 0.5], dtype=torch.float64)
        assert torch.equal(o[0], bad * sample)  # was NaN: inf * (a bilinear weight of 0) for a used neighbour
        assert torch.equal(o[1], bad * value[0, 3, 0])  # a pixel centre: inf * the pixel
    assert torch.isnan(o[2]).all()  # outside: inf * 0 (was 0)
    assert torch.isnan(o[3]).all()  # four zero pixels
    assert torch.equal(o[4], torch.zeros(2, dtype=torch.float64))  # a finite weight outside: 0
    # the gradients of the weights stay the samples (no weight in them); outside: 0
    go = torch.ones_like(out)
    gv, gl, ga = bwd_op(go, value, ss, starts, loc, attn)
    exp_ga = torch.tensor([0.1875 * 3.5, 4.0 + 4.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    assert torch.equal(ga.flatten(), exp_ga)
    assert torch.equal(gl[0, 2], torch.zeros_like(gl[0, 2])) and torch.equal(gl[0, 4], torch.zeros_like(gl[0, 4]))
    assert torch.equal(gv[0, 0], torch.zeros_like(gv[0, 0]))  # pixel (0, 0): no sample reads it


def test_size_products_overflow_raise():
    # meta tensors: an output of 2^40 * 2^31 elements, whose size does not fit in int64
    value = torch.empty(1, 0, 1, 2**31, device="meta")
    ss = torch.zeros(1, 2, dtype=torch.long, device="meta")
    starts = torch.zeros(1, dtype=torch.long, device="meta")
    loc = torch.empty(1, 2**40, 1, 1, 1, 2, device="meta")
    attn = torch.empty(1, 2**40, 1, 1, 1, device="meta")
    with pytest.raises(RuntimeError, match=r"ms_deform_attn: the output size batch \* num_queries .* does not fit"):
        op(value, ss, starts, loc, attn)
    # the CUDA kernels count a head's channel passes in an int
    value = torch.empty(1, 0, 1, 2**31 + 1, device="meta")
    with pytest.raises(RuntimeError, match=r"head_dim \(value.size\(3\)\) to be at most 2\^31 - 1"):
        op(value, ss, starts, loc[:, :1], attn[:, :1])
    with pytest.raises(RuntimeError, match=r"head_dim \(value.size\(3\)\) to be at most 2\^31 - 1"):
        bwd_op(torch.empty(1, 1, 2**31 + 1, device="meta"), value, ss, starts, loc[:, :1], attn[:, :1])


@pytest.mark.cuda
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_nonfinite_attention_weight_matches_cpu(bad, dtype):
    value, ss, starts, loc, attn = _inf_weight_case(bad, dtype)
    exp = op(value, ss, starts, loc, attn)
    out = op(value.cuda(), ss.cuda(), starts.cuda(), loc.cuda(), attn.cuda())
    torch.testing.assert_close(out.cpu(), exp, rtol=0, atol=0, equal_nan=True)
    # random inputs (vector path, D = 8), two weights non-finite, one of them outside its map
    value, ss, starts, loc, attn = make(2, 6, 2, 8, [(4, 5), (2, 3)], 3, dtype, seed=31)
    attn[0, 1, 1, 0, 2] = bad
    attn[1, 4, 0, 1, 1] = bad
    loc[1, 4, 0, 1, 1] = -3.0
    exp, gexp, go = fwd_bwd(op, value, ss, starts, loc, attn)
    assert not torch.isfinite(exp).all()
    out, grads, _ = fwd_bwd(op, value.cuda(), ss.cuda(), starts.cuda(), loc.cuda(), attn.cuda(), go.cuda())
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else {}
    torch.testing.assert_close(out.cpu(), exp, equal_nan=True, **tol)
    for g, e in zip(grads, gexp):
        torch.testing.assert_close(g.cpu(), e, equal_nan=True, **tol)
