"""Tests of mmops::riroi_align_rotated: the conformance case, then the float64 reference,
mmcv's known vectors, gradcheck, the orientation rule, special inputs, the mmcv.ops bridge and
the CUDA-specific tests."""

import math

import pytest
import roi_align_rotated_checks as checks
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, with_batch_index
from roi_align_rotated_checks import rotated_rois
from roi_align_rotated_reference import riroi_align_rotated_ref, roi_align_rotated_ref

import mmops

op = torch.ops.mmops.riroi_align_rotated


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    # K != 6: rois [6, 6] would duck-size K to the column count, which the [K, 6] check fixes
    # to 6, so test_compile would recompile at the second size (on every device)
    (N, C, H, W), K, O = ((2, 8, 10, 12), 7, 4) if size == 0 else ((3, 12, 14, 9), 9, 4)
    torch.manual_seed(30 + size)
    x = torch.randn(N, C, H, W, dtype=dtype)
    rois = rotated_rois(K, N, H, W, dtype=dtype, spatial_scale=0.5)
    return Sample((x.to(device), rois.to(device), [2, 3], 0.5, 2, O, False))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample(
            (torch.randn(2, 8, 6, 7, **f), torch.zeros(0, 6, **f), [2, 3], 1.0, 0, 8, False), out_shapes=[(0, 8, 2, 3)]
        ),
        Sample(
            (torch.randn(2, 0, 6, 7, **f), rotated_rois(4, 2, 6, 7, **f), [2, 3], 1.0, 2, 8, False),
            out_shapes=[(4, 0, 2, 3)],
        ),
    ]


def _cuda_samples(dtype):
    torch.manual_seed(19)
    for (N, C, H, W), out_size, scale, ns, O, clockwise in [
        ((1, 8, 5, 5), (2, 2), 1.0, 2, 8, False),
        ((2, 12, 7, 12), (3, 4), 0.5, 0, 4, True),
        ((2, 80, 30, 41), (7, 7), 0.25, 2, 8, False),
        ((1, 40, 16, 16), (6, 7), 1.0, 0, 1, True),
    ]:
        x = torch.randn(N, C, H, W).to(dtype)
        rois = rotated_rois(20, N, H, W, dtype=dtype, spatial_scale=scale)
        yield Sample((x, rois, list(out_size), scale, ns, O, clockwise))


class _Net(torch.nn.Module):
    """riroi_align_rotated in a model: RiRoIAlignRotated and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.RiRoIAlignRotated((3, 2), 0.5, 2, 4, True)

    def forward(self, x: torch.Tensor, rois: torch.Tensor):
        a = torch.ops.mmops.riroi_align_rotated(x * 1.5, rois, [2, 2], 0.5, 0, 2, False).sin()
        return a.sum(dim=1), self.pool(x * 2.0, rois)


def _helpers(sample):
    x, rois, out_size, scale, ns, O, clockwise = sample.args
    out = op(*sample.args)
    bwd = torch.ops.mmops._riroi_align_rotated_backward
    return [(bwd, (torch.randn_like(out), rois, list(x.shape), scale, ns, O, clockwise))]


def _message(text):
    return f"mmops::riroi_align_rotated: .*{text}"


def _args(x, r, out_size=(2, 2), scale=1.0, ns=2, O=4):
    return (x, r, list(out_size), scale, ns, O, False)


CONFORMANCE = [
    ConformanceCase(
        "riroi_align_rotated",
        op,
        _sample,
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        bad_inputs={
            "features_3d": BadInput(lambda x, r, *o: _args(x[0], r), _message("features")),
            "rois_5_cols": BadInput(lambda x, r, *o: _args(x, r[:, :5]), _message(r"rois .*\[K, 6\]")),
            "rois_dtype": BadInput(lambda x, r, *o: _args(x, r.double()), _message("rois")),
            "int_features": BadInput(lambda x, r, *o: _args(x.int(), r.int()), _message("features")),
            "out_size_zero": BadInput(lambda x, r, *o: _args(x, r, (2, 0)), _message("out_size")),
            "spatial_scale_inf": BadInput(lambda x, r, *o: _args(x, r, scale=math.inf), _message("spatial_scale")),
            "num_samples_negative": BadInput(lambda x, r, *o: _args(x, r, ns=-1), _message("num_samples")),
            "num_orientations_zero": BadInput(lambda x, r, *o: _args(x, r, O=0), _message("num_orientations")),
            "channels_not_multiple": BadInput(lambda x, r, *o: _args(x, r, O=5), _message("multiple of")),
            **{
                f"batch_index_{v}": BadInput(
                    lambda x, r, *o, v=v: _args(x, with_batch_index(r, 2, v)), "riroi_align_rotated: the batch index"
                )
                for v in (-1.0, 2.0, math.nan)
            },
        },
    ),
]


class TestRiRoIAlignRotatedConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward

MODES = [(2, 8, False), (0, 8, True), (2, 4, True), (0, 1, False), (3, 2, False)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 0.5])
@pytest.mark.parametrize("mode", MODES)
def test_matches_reference(mode, scale, dtype):
    ns, O, clockwise = mode
    torch.manual_seed(0)
    for (N, H, W), out_size in [((1, 5, 5), (2, 2)), ((2, 7, 12), (3, 4)), ((3, 20, 9), (7, 5))]:
        C = 2 * O
        x = torch.randn(N, C, H, W, dtype=dtype)
        rois = rotated_rois(12, N, H, W, dtype=dtype, spatial_scale=scale)
        rois[:, 5] *= 3  # angles over several turns, both signs
        go = torch.randn(12, C, *out_size, dtype=dtype)
        checks.check_against_reference(
            op, riroi_align_rotated_ref, x, rois, go, (list(out_size), scale, ns, O, clockwise)
        )


# mmcv's tests/test_ops/test_riroi_align_rotated.py: 2x2 output, spatial_scale 1,
# num_samples 2, 8 orientations; output and gradient of output.sum()
MMCV_FEATURE = [
    [
        [[1, 2], [3, 4]],
        [[1, 2], [4, 3]],
        [[4, 3], [2, 1]],
        [[1, 2], [5, 6]],
        [[3, 4], [7, 8]],
        [[9, 10], [13, 14]],
        [[11, 12], [15, 16]],
        [[1, 1], [2, 2]],
    ]
]
MMCV_ROIS = [[0.0, 0.5, 0.5, 1.0, 1.0, math.pi / 3], [0.0, 1.0, 1.0, 3.0, 3.0, math.pi / 2]]
MMCV_OUTPUT = [
    [
        [[1.8425, 1.3516], [2.3151, 1.8241]],
        [[2.4779, 1.7416], [3.2173, 2.5632]],
        [[2.7149, 2.2638], [2.6540, 2.3673]],
        [[2.9461, 2.8638], [2.8028, 2.7205]],
        [[4.1943, 2.7214], [5.6119, 4.1391]],
        [[7.5276, 6.0547], [8.9453, 7.4724]],
        [[12.1943, 10.7214], [13.6119, 12.1391]],
        [[9.5489, 8.4237], [10.5763, 9.4511]],
    ],
    [
        [[7.6562, 12.5625], [4.0000, 6.6250]],
        [[1.0000, 1.3125], [0.5000, 0.6562]],
        [[1.6562, 1.9375], [1.0000, 1.3125]],
        [[1.8438, 2.0547], [0.7500, 1.1562]],
        [[0.8438, 3.0625], [0.2500, 1.1875]],
        [[2.6562, 2.5625], [1.5000, 1.6250]],
        [[3.6562, 4.5625], [2.0000, 2.6250]],
        [[6.6562, 10.5625], [3.5000, 5.6250]],
    ],
]
MMCV_GRAD = [[[[1.4727, 1.5586], [1.5586, 1.6602]]] * 8]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mmcv_known_vectors(dtype):
    x = torch.tensor(MMCV_FEATURE, dtype=dtype, requires_grad=True)
    y = mmops.RiRoIAlignRotated((2, 2), 1.0, 2, 8, False)(x, torch.tensor(MMCV_ROIS, dtype=dtype))
    y.sum().backward()
    torch.testing.assert_close(y.double(), torch.tensor(MMCV_OUTPUT, dtype=torch.float64), rtol=0, atol=1e-3)
    torch.testing.assert_close(
        x.grad.double(), torch.tensor(MMCV_GRAD, dtype=torch.float64).reshape(1, 8, 2, 2), rtol=0, atol=1e-3
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mmcv_inputs_in_low_precision(dtype):
    # pi / 2 rounds below pi / 2 in 16 bits: the orientation position falls just under 2, on
    # the other side of mmcv's jump at whole steps, so mmcv's float32 vector does not apply;
    # the float64 reference of the rounded inputs does
    x = torch.tensor(MMCV_FEATURE, dtype=dtype, requires_grad=True)
    rois = torch.tensor(MMCV_ROIS, dtype=dtype)
    y = mmops.RiRoIAlignRotated((2, 2), 1.0, 2, 8, False)(x, rois)
    y.sum().backward()
    xd = x.detach().double().requires_grad_(True)
    exp = riroi_align_rotated_ref(xd, rois.double(), (2, 2), 1.0, 2, 8, False)
    exp.sum().backward()
    torch.testing.assert_close(y.double(), exp, **TOL[dtype])
    torch.testing.assert_close(x.grad.double(), xd.grad, **TOL[dtype])


def test_reference_reproduces_mmcv_vectors():
    x = torch.tensor(MMCV_FEATURE, dtype=torch.float64, requires_grad=True)
    y = riroi_align_rotated_ref(x, torch.tensor(MMCV_ROIS, dtype=torch.float64), (2, 2), 1.0, 2, 8, False)
    y.sum().backward()
    torch.testing.assert_close(y, torch.tensor(MMCV_OUTPUT, dtype=torch.float64), rtol=0, atol=1e-3)
    torch.testing.assert_close(
        x.grad, torch.tensor(MMCV_GRAD, dtype=torch.float64).reshape(1, 8, 2, 2), rtol=0, atol=1e-3
    )


# --------------------------------------------------------------------------- orientation rule


def test_whole_orientation_steps_shift_the_channels():
    # theta just above 2pi * s / O (exact multiples may round below: mmcv's blend jumps
    # there): output orientation o reads (o - s) mod O of the rotated sampling that
    # roi_align_rotated (unaligned) does
    torch.manual_seed(12)
    O = 4
    x = torch.randn(1, 2 * O, 9, 9, dtype=torch.float64)
    for s in (-5, -1, 0, 1, 3, 6):
        rois = torch.tensor([[0, 4.2, 3.9, 5.0, 4.0, 2 * math.pi * (s + 1e-9) / O]], dtype=torch.float64)
        out = op(x, rois, [2, 3], 1.0, 2, O, False)
        base = torch.ops.mmops.roi_align_rotated(x, rois, [2, 3], 1.0, 2, False, False)
        idx = torch.tensor([g * O + (o - s) % O for g in range(2) for o in range(O)])
        torch.testing.assert_close(out, base[:, idx], rtol=1e-7, atol=1e-7)


def test_blend_between_orientations():
    torch.manual_seed(13)
    x = torch.randn(1, 8, 7, 7, dtype=torch.float64)
    rois = torch.tensor([[0, 3.0, 3.0, 4.0, 4.0, 2 * math.pi * 0.25 / 8]], dtype=torch.float64)
    out = op(x, rois, [2, 2], 1.0, 2, 8, False)
    base = roi_align_rotated_ref(x, rois, (2, 2), 1.0, 2, False)
    rot = torch.arange(8)
    torch.testing.assert_close(out, 0.75 * base[:, rot] + 0.25 * base[:, (rot + 1) % 8], rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- gradcheck


def test_gradcheck():
    torch.manual_seed(2)
    x = torch.randn(2, 8, 9, 11, dtype=torch.float64, requires_grad=True)
    rois = rotated_rois(5, 2, 9, 11, dtype=torch.float64)
    for ns, O, clockwise in MODES:
        assert torch.autograd.gradcheck(
            lambda t: op(t, rois, [3, 2], 1.0, ns, O, clockwise), (x,), check_batched_grad=False, fast_mode=True
        )


def test_double_backward_raises():
    x = torch.randn(1, 8, 6, 6, dtype=torch.float64, requires_grad=True)
    out = op(x, rotated_rois(4, 1, 6, 6, dtype=torch.float64), [2, 2], 1.0, 2, 8, False)
    go = torch.randn_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        (g,) = torch.autograd.grad(out, x, go, create_graph=True)
        torch.autograd.grad(g.sum(), (x, go))


# --------------------------------------------------------------------------- special inputs


def test_rois_outside_and_non_finite_give_zeros():
    x = torch.randn(1, 8, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor(
        [[0, 30, 30, 4, 4, 0.3], [0, math.nan, 3, 2, 2, 0.0], [0, 3, 3, 2, 2, -math.inf]], dtype=torch.float64
    )
    out = op(x, rois, [2, 2], 1.0, 0, 8, False)
    assert torch.equal(out, torch.zeros_like(out))
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(x))


def test_huge_angle_is_defined():
    x = torch.randn(1, 8, 6, 6)
    rois = torch.tensor([[0, 3, 3, 2, 2, 1e30], [0, 3, 3, 2, 2, -1e30]])
    out = op(x, rois, [2, 2], 1.0, 2, 8, False)
    assert torch.isfinite(out).all()


def test_strided_and_channels_last_input():
    torch.manual_seed(7)
    wide = torch.randn(2, 8, 9, 20, dtype=torch.float64)
    rois = rotated_rois(8, 2, 9, 10, dtype=torch.float64)
    exp = op(wide[..., :10].contiguous(), rois, [3, 3], 1.0, 0, 4, False)
    for x in (wide[..., :10], wide[..., :10].contiguous(memory_format=torch.channels_last)):
        torch.testing.assert_close(op(x, rois, [3, 3], 1.0, 0, 4, False), exp, rtol=0, atol=0)


# --------------------------------------------------------------------------- mmcv.ops bridge


def test_mmcv_bridge_runs_mmcv_python_on_mmops():
    import mmops.mmcv_ops  # noqa: F401  (installs the bridge before mmcv.ops is imported)

    pytest.importorskip("mmengine")
    mmcv_ops = pytest.importorskip("mmcv.ops")
    assert "mmcv.ops.riroi_align_rotated.RiRoIAlignRotatedFunction" in mmops.mmcv_ops.routed_ops()
    torch.manual_seed(8)
    x = torch.randn(2, 8, 10, 12, dtype=torch.float64)
    rois = rotated_rois(6, 2, 10, 12, dtype=torch.float64)
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    out = mmcv_ops.RiRoIAlignRotated((3, 2), 0.5, 2, 4, True)(xa, rois)
    exp = mmops.riroi_align_rotated(xb, rois, (3, 2), 0.5, 2, 4, True)
    torch.testing.assert_close(out, exp, rtol=0, atol=0)
    go = torch.randn_like(out)
    out.backward(go)
    exp.backward(go)
    torch.testing.assert_close(xa.grad, xb.grad, rtol=0, atol=0)
    params = dict(pooled_height=3, pooled_width=2, spatial_scale=0.5, num_samples=2, num_orientations=4, clockwise=True)
    checks.check_mmcv_ext("riroi_align_rotated", x, rois, go, exp.detach(), xb.grad, **params)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
def test_cuda_bad_batch_index_is_guarded_and_strict_raises():
    checks.check_cuda_bad_batch_index(op, 8, ([2, 2], 1.0, 2, 8, False))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_matches_cpu_at_redet_size(dtype):
    checks.check_cuda_matches_cpu(op, dtype, lambda ns: ([7, 7], 1.0, ns, 8, False))


@pytest.mark.cuda
def test_cuda_deterministic_backward_matches_and_repeats():
    checks.check_cuda_deterministic_backward(op, lambda ns: ([7, 7], 1.0, ns, 8, False))
