"""Tests of mmops::roi_align_rotated: the conformance case, then the float64 reference, mmcv's
known vectors, gradcheck, the roi_align equivalences, special inputs, the mmcv.ops bridge and
the CUDA-specific tests."""

import math

import pytest
import roi_align_rotated_checks as checks
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, with_batch_index
from roi_align_rotated_checks import grad_of, rotated_rois
from roi_align_rotated_reference import roi_align_rotated_ref

import mmops

op = torch.ops.mmops.roi_align_rotated


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    # K != 6: rois [6, 6] would duck-size K to the column count, which the [K, 6] check fixes
    # to 6, so test_compile would recompile at the second size (on every device)
    (N, C, H, W), K = ((2, 3, 10, 12), 7) if size == 0 else ((3, 4, 14, 9), 9)
    torch.manual_seed(20 + size)
    x = torch.randn(N, C, H, W, dtype=dtype)
    rois = rotated_rois(K, N, H, W, dtype=dtype, spatial_scale=0.5)
    return Sample((x.to(device), rois.to(device), [2, 3], 0.5, 2, True, False))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample(
            (torch.randn(2, 3, 6, 7, **f), torch.zeros(0, 6, **f), [2, 3], 1.0, 0, True, False),
            out_shapes=[(0, 3, 2, 3)],
        ),
        Sample(
            (torch.randn(2, 0, 6, 7, **f), rotated_rois(4, 2, 6, 7, **f), [2, 3], 1.0, 2, True, False),
            out_shapes=[(4, 0, 2, 3)],
        ),
    ]


def _cuda_samples(dtype):
    """Every mode; maps of several channel chunks and bin chunks."""
    torch.manual_seed(9)
    for (N, C, H, W), out_size, scale, sr, aligned, clockwise in [
        ((1, 1, 5, 5), (2, 2), 1.0, 2, True, False),
        ((2, 3, 7, 12), (3, 4), 0.5, 0, True, True),
        ((2, 67, 30, 41), (7, 7), 0.25, 2, False, False),
        ((1, 40, 16, 16), (6, 7), 1.0, 0, False, True),
    ]:
        x = torch.randn(N, C, H, W).to(dtype)
        rois = rotated_rois(20, N, H, W, dtype=dtype, spatial_scale=scale)
        yield Sample((x, rois, list(out_size), scale, sr, aligned, clockwise))


class _Net(torch.nn.Module):
    """roi_align_rotated in a model: RoIAlignRotated and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.RoIAlignRotated((3, 2), 0.5, 2, True, True)

    def forward(self, x: torch.Tensor, rois: torch.Tensor):
        a = torch.ops.mmops.roi_align_rotated(x * 1.5, rois, [2, 2], 0.5, 0, False, False).sin()
        return a.sum(dim=1), self.pool(x * 2.0, rois)


def _helpers(sample):
    x, rois, out_size, scale, sr, aligned, clockwise = sample.args
    out = op(*sample.args)
    bwd = torch.ops.mmops._roi_align_rotated_backward
    return [(bwd, (torch.randn_like(out), rois, list(x.shape), scale, sr, aligned, clockwise))]


def _message(text):
    return f"mmops::roi_align_rotated: .*{text}"


def _args(x, r, out_size=(2, 2), scale=1.0, sr=2):
    return (x, r, list(out_size), scale, sr, True, False)


CONFORMANCE = [
    ConformanceCase(
        "roi_align_rotated",
        op,
        _sample,
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        bad_inputs={
            "input_3d": BadInput(lambda x, r, *o: _args(x[0], r), _message("input")),
            "rois_1d": BadInput(lambda x, r, *o: _args(x, r[0]), _message("rois")),
            "rois_5_cols": BadInput(lambda x, r, *o: _args(x, r[:, :5]), _message(r"rois .*\[K, 6\]")),
            "rois_dtype": BadInput(lambda x, r, *o: _args(x, r.double()), _message("rois")),
            "int_input": BadInput(lambda x, r, *o: _args(x.int(), r.int()), _message("input")),
            "output_h_zero": BadInput(lambda x, r, *o: _args(x, r, (0, 2)), _message("output_size")),
            "spatial_scale_zero": BadInput(lambda x, r, *o: _args(x, r, scale=0.0), _message("spatial_scale")),
            "spatial_scale_nan": BadInput(lambda x, r, *o: _args(x, r, scale=math.nan), _message("spatial_scale")),
            "sampling_ratio_negative": BadInput(lambda x, r, *o: _args(x, r, sr=-1), _message("sampling_ratio")),
            "sampling_ratio_huge": BadInput(lambda x, r, *o: _args(x, r, sr=513), _message("sampling_ratio")),
            **{
                f"batch_index_{v}": BadInput(
                    lambda x, r, *o, v=v: _args(x, with_batch_index(r, 2, v)), "roi_align_rotated: the batch index"
                )
                for v in (-1.0, 2.0, math.nan)
            },
        },
    ),
]


class TestRoIAlignRotatedConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward

MODES = [(2, True, False), (0, True, False), (2, False, True), (0, False, False), (3, True, True)]
SHAPES = [((1, 1, 5, 5), (2, 2)), ((2, 3, 7, 12), (3, 4)), ((3, 5, 20, 9), (7, 5))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 0.5])
@pytest.mark.parametrize("mode", MODES)
def test_matches_reference(mode, scale, dtype):
    sr, aligned, clockwise = mode
    torch.manual_seed(0)
    for (N, C, H, W), out_size in SHAPES:
        x = torch.randn(N, C, H, W, dtype=dtype)
        rois = rotated_rois(12, N, H, W, dtype=dtype, spatial_scale=scale)
        go = torch.randn(12, C, *out_size, dtype=dtype)
        checks.check_against_reference(
            op, roi_align_rotated_ref, x, rois, go, (list(out_size), scale, sr, aligned, clockwise)
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_cpu_matches_reference(dtype):
    torch.manual_seed(1)
    x = torch.randn(2, 3, 9, 11).to(dtype)
    rois = rotated_rois(8, 2, 9, 11, dtype=dtype)
    go = torch.randn(8, 3, 3, 3).to(dtype)
    out, g = grad_of(op, x, rois, go, [3, 3], 1.0, 2, True, False)
    exp, gexp = grad_of(roi_align_rotated_ref, x, rois, go, [3, 3], 1.0, 2, True, False, float64=True)
    assert out.dtype == dtype and g.dtype == dtype
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.float16 else dict(rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(out.double(), exp, **tol)
    torch.testing.assert_close(g.double(), gexp, **tol)


# mmcv's tests/test_ops/test_roi_align_rotated.py: 2x2 output, spatial_scale 1, sampling_ratio 2,
# aligned; (input, roi, output, gradient of output.sum())
MMCV_VECTORS = [
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 0.5, 0.5, 1.0, 1.0, 0]],
        [[[[1.0, 1.25], [1.5, 1.75]]]],
        [[[[3.0625, 0.4375], [0.4375, 0.0625]]]],
    ),
    (
        [[[[1.0, 2.0], [3.0, 4.0]]]],
        [[0.0, 0.5, 0.5, 1.0, 1.0, math.pi / 2]],
        [[[[1.5, 1], [1.75, 1.25]]]],
        [[[[3.0625, 0.4375], [0.4375, 0.0625]]]],
    ),
    (
        [[[[1.0, 2.0], [3.0, 4.0]], [[4.0, 3.0], [2.0, 1.0]]]],
        [[0.0, 0.5, 0.5, 1.0, 1.0, 0]],
        [[[[1.0, 1.25], [1.5, 1.75]], [[4.0, 3.75], [3.5, 3.25]]]],
        [[[[3.0625, 0.4375], [0.4375, 0.0625]], [[3.0625, 0.4375], [0.4375, 0.0625]]]],
    ),
    (
        [[[[1.0, 2.0, 5.0, 6.0], [3.0, 4.0, 7.0, 8.0], [9.0, 10.0, 13.0, 14.0], [11.0, 12.0, 15.0, 16.0]]]],
        [[0.0, 1.5, 1.5, 3.0, 3.0, 0]],
        [[[[1.9375, 4.75], [7.5625, 10.375]]]],
        [
            [
                [
                    [0.47265625, 0.42968750, 0.42968750, 0.04296875],
                    [0.42968750, 0.39062500, 0.39062500, 0.03906250],
                    [0.42968750, 0.39062500, 0.39062500, 0.03906250],
                    [0.04296875, 0.03906250, 0.03906250, 0.00390625],
                ]
            ]
        ],
    ),
    (
        [[[[1.0, 2.0, 5.0, 6.0], [3.0, 4.0, 7.0, 8.0], [9.0, 10.0, 13.0, 14.0], [11.0, 12.0, 15.0, 16.0]]]],
        [[0.0, 1.5, 1.5, 3.0, 3.0, math.pi / 2]],
        [[[[7.5625, 1.9375], [10.375, 4.75]]]],
        [
            [
                [
                    [0.47265625, 0.42968750, 0.42968750, 0.04296875],
                    [0.42968750, 0.39062500, 0.39062500, 0.03906250],
                    [0.42968750, 0.39062500, 0.39062500, 0.03906250],
                    [0.04296875, 0.03906250, 0.03906250, 0.00390625],
                ]
            ]
        ],
    ),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(MMCV_VECTORS)))
def test_mmcv_known_vectors(case, dtype):
    inp, roi, out, grad = MMCV_VECTORS[case]
    x = torch.tensor(inp, dtype=dtype, requires_grad=True)
    y = mmops.RoIAlignRotated((2, 2), 1.0, 2)(x, torch.tensor(roi, dtype=dtype))
    y.sum().backward()
    tol = dict(rtol=0, atol=1e-3) if dtype != torch.bfloat16 else dict(rtol=0, atol=3e-2)
    torch.testing.assert_close(y.float(), torch.tensor(out), **tol)
    torch.testing.assert_close(x.grad.float(), torch.tensor(grad), **tol)


def test_reference_reproduces_mmcv_vectors():
    for inp, roi, out, grad in MMCV_VECTORS:
        x = torch.tensor(inp, dtype=torch.float64, requires_grad=True)
        y = roi_align_rotated_ref(x, torch.tensor(roi, dtype=torch.float64), (2, 2), 1.0, 2, True, False)
        y.sum().backward()
        torch.testing.assert_close(y, torch.tensor(out, dtype=torch.float64), rtol=0, atol=1e-12)
        torch.testing.assert_close(x.grad, torch.tensor(grad, dtype=torch.float64), rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- equivalences


def _axis_aligned(rois):
    """[K, 5] corner boxes of [K, 6] rotated rois with theta = 0."""
    b, cx, cy, w, h = rois[:, :5].unbind(1)
    return torch.stack([b, cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)


@pytest.mark.parametrize("sr, aligned", [(2, True), (0, True), (2, False), (0, False)])
def test_theta_zero_equals_roi_align(sr, aligned):
    torch.manual_seed(4)
    x = torch.randn(2, 4, 13, 17, dtype=torch.float64)
    # sides of at least 1.3 pixels after scaling: the legacy (unaligned) clamp to 1 x 1 grows
    # a smaller box about its centre here but from its corner in roi_align
    rois = rotated_rois(10, 2, 13, 17, dtype=torch.float64, spatial_scale=0.5)
    rois[:, 5] = 0
    out = op(x, rois, [3, 4], 0.5, sr, aligned, False)
    exp = mmops.roi_align(x, _axis_aligned(rois), [3, 4], 0.5, sr, "avg", aligned)
    torch.testing.assert_close(out, exp, **TOL[torch.float64])


def test_theta_pi_equals_flipped_roi_align():
    # a half turn about the centre visits the same samples in reverse order in both axes
    torch.manual_seed(5)
    x = torch.randn(2, 3, 12, 15, dtype=torch.float64)
    rois = rotated_rois(10, 2, 12, 15, dtype=torch.float64)
    for clockwise in (False, True):
        rois[:, 5] = math.pi
        out = op(x, rois, [3, 4], 1.0, 2, True, clockwise)
        exp = mmops.roi_align(x, _axis_aligned(rois), [3, 4], 1.0, 2, "avg", True).flip(2, 3)
        torch.testing.assert_close(out, exp, rtol=1e-9, atol=1e-9)


def test_clockwise_negates_theta():
    torch.manual_seed(6)
    x = torch.randn(1, 2, 10, 10, dtype=torch.float64)
    rois = rotated_rois(6, 1, 10, 10, dtype=torch.float64)
    flipped = rois.clone()
    flipped[:, 5] = -flipped[:, 5]
    torch.testing.assert_close(op(x, rois, [2, 3], 1.0, 0, True, True), op(x, flipped, [2, 3], 1.0, 0, True, False))


# --------------------------------------------------------------------------- gradcheck


def test_gradcheck():
    torch.manual_seed(2)
    x = torch.randn(2, 3, 9, 11, dtype=torch.float64, requires_grad=True)
    rois = rotated_rois(5, 2, 9, 11, dtype=torch.float64)
    for sr, aligned, clockwise in MODES:
        assert torch.autograd.gradcheck(
            lambda t: op(t, rois, [3, 2], 1.0, sr, aligned, clockwise), (x,), check_batched_grad=False, fast_mode=True
        )
    assert torch.autograd.gradcheck(
        lambda t: mmops.roi_align_rotated(t, rois, 2, 0.5), (x,), check_batched_grad=False, fast_mode=True
    )


def test_double_backward_raises():
    x = torch.randn(1, 2, 6, 6, dtype=torch.float64, requires_grad=True)
    out = op(x, rotated_rois(4, 1, 6, 6, dtype=torch.float64), [2, 2], 1.0, 2, True, False)
    go = torch.randn_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        (g,) = torch.autograd.grad(out, x, go, create_graph=True)
        torch.autograd.grad(g.sum(), (x, go))


# --------------------------------------------------------------------------- special inputs


def test_rois_outside_zero_size_and_non_finite():
    x = torch.randn(1, 2, 6, 6, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor(
        [
            [0, 30, 30, 4, 4, 0.3],  # far outside: zeros
            [0, 3, 3, 0, 0, 0.0],  # zero size, aligned: no samples, zeros
            [0, math.nan, 3, 2, 2, 0.0],  # non-finite: zeros
            [0, 3, 3, 2, 2, math.inf],
        ],
        dtype=torch.float64,
    )
    out = op(x, rois, [2, 2], 1.0, 0, True, False)
    assert torch.equal(out, torch.zeros_like(out))
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
    # unaligned, a zero-size roi is 1 x 1 (mmcv's legacy clamp)
    torch.testing.assert_close(
        op(x, rois[1:2], [2, 2], 1.0, 0, False, False), roi_align_rotated_ref(x, rois[1:2], (2, 2), 1.0, 0, False)
    )


@pytest.mark.parametrize("shape", [(2, 3, 0, 5), (2, 3, 4, 0)])
def test_empty_feature_map_gives_zeros(shape):
    x = torch.randn(*shape, requires_grad=True)
    out = op(x, rotated_rois(4, 2, 4, 5), [2, 2], 1.0, 2, True, False)
    assert torch.equal(out, torch.zeros(4, 3, 2, 2))
    (g,) = torch.autograd.grad(out.sum(), x)
    assert g.shape == shape


def test_strided_and_channels_last_input():
    torch.manual_seed(7)
    wide = torch.randn(2, 6, 9, 20, dtype=torch.float64)
    rois = rotated_rois(8, 2, 9, 10, dtype=torch.float64)
    exp = op(wide[..., :10].contiguous(), rois, [3, 3], 1.0, 0, True, False)
    for x in (wide[..., :10], wide[..., :10].contiguous(memory_format=torch.channels_last)):
        torch.testing.assert_close(op(x, rois, [3, 3], 1.0, 0, True, False), exp, rtol=0, atol=0)


def test_module_repr_and_defaults():
    m = mmops.RoIAlignRotated(7, 0.25)
    assert m.output_size == [7, 7] and m.sampling_ratio == 0 and m.aligned and not m.clockwise
    assert "clockwise=False" in repr(m)


# --------------------------------------------------------------------------- mmcv.ops bridge


def test_mmcv_bridge_runs_mmcv_python_on_mmops():
    import mmops.mmcv_ops  # noqa: F401  (installs the bridge before mmcv.ops is imported)

    pytest.importorskip("mmengine")
    mmcv_ops = pytest.importorskip("mmcv.ops")
    assert "mmcv.ops.roi_align_rotated.RoIAlignRotatedFunction" in mmops.mmcv_ops.routed_ops()
    torch.manual_seed(8)
    x = torch.randn(2, 3, 10, 12, dtype=torch.float64)
    rois = rotated_rois(6, 2, 10, 12, dtype=torch.float64)
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    out = mmcv_ops.roi_align_rotated(xa, rois, (3, 2), 0.5, 2, True, True)
    exp = mmops.roi_align_rotated(xb, rois, (3, 2), 0.5, 2, True, True)
    torch.testing.assert_close(out, exp, rtol=0, atol=0)
    go = torch.randn_like(out)
    out.backward(go)
    exp.backward(go)
    torch.testing.assert_close(xa.grad, xb.grad, rtol=0, atol=0)
    module = mmcv_ops.RoIAlignRotated((2, 2), 1.0, 0)
    torch.testing.assert_close(module(x, rois), mmops.RoIAlignRotated((2, 2), 1.0, 0)(x, rois))
    params = dict(pooled_height=3, pooled_width=2, spatial_scale=0.5, sampling_ratio=2, aligned=True, clockwise=True)
    checks.check_mmcv_ext("roi_align_rotated", x, rois, go, exp.detach(), xb.grad, **params)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
def test_cuda_bad_batch_index_is_guarded_and_strict_raises():
    checks.check_cuda_bad_batch_index(op, 3, ([2, 2], 1.0, 2, True, False))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_matches_reference_at_detection_size(dtype):
    checks.check_cuda_matches_cpu(op, dtype, lambda sr: ([7, 7], 1.0, sr, True, False))


def _misaligned_channels_last(x):
    """x as a channels-last tensor whose data starts one element into its storage."""
    n, c, h, w = x.shape
    flat = torch.empty(n * h * w * c + 1, dtype=x.dtype, device=x.device)
    out = flat[1:].view(n, h, w, c).permute(0, 3, 1, 2)
    out.copy_(x)
    return out


@pytest.mark.cuda
@pytest.mark.parametrize(
    "channels,dtype,layout",
    [
        (136, torch.float32, "nchw"),  # packs of 4 channels, a partial second chunk
        (136, torch.float16, "channels_last"),
        (136, torch.float64, "nchw"),  # packs of 2
        (134, torch.float32, "nchw"),  # not a multiple of 4: one channel per lane
        (136, torch.float32, "misaligned"),  # a map not aligned to 16 bytes: one channel per lane
    ],
)
def test_cuda_channel_pack_paths_match_cpu(channels, dtype, layout):
    torch.manual_seed(15)
    x = torch.randn(2, channels, 20, 26).to(dtype)
    rois = rotated_rois(40, 2, 20, 26, dtype=dtype, spatial_scale=0.5)
    go = torch.randn(40, channels, 5, 4).to(dtype)
    xc = x.cuda()
    if layout == "channels_last":
        xc = xc.contiguous(memory_format=torch.channels_last)
    elif layout == "misaligned":
        xc = _misaligned_channels_last(xc)
        assert xc.data_ptr() % 16 != 0
    out, g = grad_of(op, xc, rois.cuda(), go.cuda(), [5, 4], 0.5, 2, True, False)
    exp, gexp = grad_of(op, *(t.double() for t in (x, rois, go)), [5, 4], 0.5, 2, True, False)
    tol = TOL[dtype]
    torch.testing.assert_close(out.cpu().double(), exp, **tol)
    torch.testing.assert_close(g.cpu().double(), gexp, **dict(rtol=tol["rtol"] * 5, atol=tol["atol"] * 5))


@pytest.mark.cuda
def test_cuda_deterministic_backward_matches_and_repeats():
    checks.check_cuda_deterministic_backward(op, lambda sr: ([7, 7], 1.0, sr, True, False))
