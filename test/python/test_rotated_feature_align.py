"""Tests of mmops::rotated_feature_align: the conformance cases, then the float64
reference, mmcv's known vectors, gradcheck, special boxes and the mmcv bridge."""

import importlib
import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL
from rotated_feature_align_reference import rotated_feature_align_ref

import mmops

op = torch.ops.mmops.rotated_feature_align


def random_rboxes(N, H, W, scale, dtype=torch.float32, generator=None):
    """[N, H, W, 5] boxes in image coordinates (feature coordinates / scale): centres up
    to 2 pixels outside the map, sizes up to the map, any angle."""
    g = generator
    r = torch.rand(N, H, W, 5, dtype=torch.float64, generator=g)
    rows = r[..., 0] * (H + 4) - 2
    cols = r[..., 1] * (W + 4) - 2
    w, h = r[..., 2] * W, r[..., 3] * H
    a = (r[..., 4] * 2 - 1) * math.pi
    return torch.stack([rows / scale, cols / scale, w / scale, h / scale, a], -1).to(dtype)


# --------------------------------------------------------------------------- conformance


def _sample_fn(scale, points):
    def sample(device, dtype, size):
        N, C, H, W = (2, 3, 6, 7) if size == 0 else (3, 4, 9, 5)
        g = torch.Generator().manual_seed(30 + size)
        x = torch.randn(N, C, H, W, dtype=torch.float64, generator=g).to(dtype)
        boxes = random_rboxes(N, H, W, scale, dtype, g)
        return Sample((x.to(device), boxes.to(device), scale, points))

    return sample


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample((torch.randn(0, 3, 4, 5, **f), torch.zeros(0, 4, 5, 5, **f), 0.5, 5), out_shapes=[(0, 3, 4, 5)]),
        Sample((torch.randn(2, 0, 4, 5, **f), torch.zeros(2, 4, 5, 5, **f), 0.5, 1), out_shapes=[(2, 0, 4, 5)]),
        Sample((torch.randn(2, 3, 0, 5, **f), torch.zeros(2, 0, 5, 5, **f), 0.5, 5), out_shapes=[(2, 3, 0, 5)]),
    ]


class _Net(torch.nn.Module):
    """rotated_feature_align in a model: the module, the wrapper and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.align = mmops.RotatedFeatureAlign(0.5, 5)

    def forward(self, x: torch.Tensor, boxes: torch.Tensor):
        one = mmops.rotated_feature_align(x * 1.5, boxes, 0.5, 1).sin()
        return one + self.align(x, boxes * 0.5), torch.ops.mmops.rotated_feature_align(x, boxes, 0.25, 5)


def _helpers(sample):
    x, boxes, scale, points = sample.args
    bwd = torch.ops.mmops._rotated_feature_align_backward
    return [(bwd, (torch.randn_like(x), boxes, scale, points))]


def _message(text):
    return f"mmops::rotated_feature_align: .*{text}"


def _bad_inputs():
    return {
        "features_3d": BadInput(lambda x, b, s, p: (x[0], b, s, p), _message("features"), meta=True),
        "int_features": BadInput(lambda x, b, s, p: (x.int(), b, s, p), _message("features")),
        "boxes_4_cols": BadInput(lambda x, b, s, p: (x, b[..., :4], s, p), _message("best_rbboxes"), meta=True),
        "boxes_3d": BadInput(lambda x, b, s, p: (x, b[0], s, p), _message("best_rbboxes"), meta=True),
        "boxes_height": BadInput(lambda x, b, s, p: (x, b[:, 1:], s, p), _message("best_rbboxes"), meta=True),
        "boxes_batch": BadInput(lambda x, b, s, p: (x, b[1:], s, p), _message("best_rbboxes"), meta=True),
        "boxes_dtype": BadInput(lambda x, b, s, p: (x, b.double(), s, p), _message("best_rbboxes"), meta=True),
        "points_3": BadInput(lambda x, b, s, p: (x, b, s, 3), _message("points"), meta=True),
        "points_0": BadInput(lambda x, b, s, p: (x, b, s, 0), _message("points"), meta=True),
        "spatial_scale_zero": BadInput(lambda x, b, s, p: (x, b, 0.0, p), _message("spatial_scale"), meta=True),
        "spatial_scale_nan": BadInput(lambda x, b, s, p: (x, b, math.nan, p), _message("spatial_scale")),
        "spatial_scale_neg": BadInput(lambda x, b, s, p: (x, b, -0.5, p), _message("spatial_scale")),
    }


CONFORMANCE = [
    ConformanceCase(
        f"rotated_feature_align_p{points}_s{scale}",
        op,
        _sample_fn(scale, points),
        grad_args=(0,),
        feature_args=(0,),
        channels_last_output=True,
        nonzero_grads=True,
        empty=_empty,
        module=_Net if points == 5 else None,
        helpers=_helpers,
        bad_inputs=_bad_inputs(),
    )
    for points, scale in ((1, 0.125), (5, 0.5))
]


class TestRotatedFeatureAlignConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def grad_of(x, boxes, go, scale, points):
    x = x.detach().requires_grad_(True)
    out = op(x, boxes, scale, points)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


def ref_grad_of(x, boxes, go, scale, points):
    xd = x.detach().double().requires_grad_(True)
    out = rotated_feature_align_ref(xd, boxes, scale, points)
    (g,) = torch.autograd.grad(out, xd, go.double())
    return out.detach(), g


SHAPES = [(1, 1, 5, 5), (2, 3, 7, 12), (3, 5, 16, 9)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("points", [1, 5])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.125])
@pytest.mark.parametrize("channels_last", [False, True])
def test_matches_reference(scale, points, dtype, channels_last):
    g = torch.Generator().manual_seed(3)
    for N, C, H, W in SHAPES:
        x = torch.randn(N, C, H, W, dtype=dtype, generator=g)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        boxes = random_rboxes(N, H, W, scale, dtype, g)
        go = torch.randn(N, C, H, W, dtype=dtype, generator=g)
        out, grad = grad_of(x, boxes, go, scale, points)
        exp, gexp = ref_grad_of(x, boxes, go, scale, points)
        assert out.dtype == dtype and out.shape == x.shape
        assert out.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        assert (exp - x.double()).abs().sum() > 0 and (gexp - go.double()).abs().sum() > 0
        torch.testing.assert_close(out, exp.to(dtype), **TOL[dtype])
        torch.testing.assert_close(grad, gexp.to(dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_cpu(dtype):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 8, 9, generator=g)
    boxes = random_rboxes(2, 8, 9, 0.5, generator=g)
    go = torch.randn(2, 3, 8, 9, generator=g)
    xl, bl, gl = x.to(dtype), boxes.to(dtype), go.to(dtype)
    out, grad = grad_of(xl, bl, gl, 0.5, 5)
    exp, gexp = ref_grad_of(xl, bl, gl, 0.5, 5)
    assert out.dtype == dtype and grad.dtype == dtype
    torch.testing.assert_close(out.double(), exp, **TOL[dtype])
    torch.testing.assert_close(grad.double(), gexp, **TOL[dtype])


@pytest.mark.parametrize("points", [1, 5])
def test_gradcheck(points):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, generator=g, requires_grad=True)
    boxes = random_rboxes(2, 5, 6, 0.5, torch.float64, g)
    assert torch.autograd.gradcheck(lambda t: op(t, boxes, 0.5, points), (x,))
    assert torch.autograd.gradcheck(
        lambda t: op(t.contiguous(memory_format=torch.channels_last), boxes, 0.5, points), (x,)
    )


def test_autocast_runs_in_float32():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 3, 6, 7, generator=g).bfloat16()
    boxes = random_rboxes(2, 6, 7, 0.5, generator=g)  # float32 boxes with bfloat16 features: amp
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x, boxes, 0.5, 5)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, op(x.float(), boxes, 0.5, 5).bfloat16())


def test_boxes_get_no_gradient():
    x = torch.randn(1, 2, 4, 4, requires_grad=True)
    boxes = random_rboxes(1, 4, 4, 1.0).requires_grad_(True)
    out = op(x, boxes, 1.0, 5)
    (gb,) = torch.autograd.grad(out.sum(), boxes, allow_unused=True, materialize_grads=True)
    assert torch.equal(gb, torch.zeros_like(boxes))


def test_strided_inputs():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 8, 6, 7, generator=g)[:, ::2]
    boxes = random_rboxes(2, 6, 14, 0.5, generator=g)[:, :, ::2]
    torch.testing.assert_close(op(x, boxes, 0.5, 5), op(x.contiguous(), boxes.contiguous(), 0.5, 5), rtol=0, atol=0)


# --------------------------------------------------------------------------- mmcv's vectors

# tests/test_ops/test_rotated_feature_align.py of mmcv (points=1, spatial_scale=1/8, grad of sum)
MMCV_FEATURE = [
    [
        [[1.2924, -0.2172, -0.5222, 0.1172], [0.9144, 1.2248, 1.3115, -0.9690],
         [-0.8949, -1.1797, -0.9093, -0.3961], [-0.4586, 0.5062, -0.7947, -0.7397]],
        [[-1.0943, -0.7495, 1.3461, -1.1652], [0.2034, 0.6763, -1.2357, 0.5231],
         [-1.0062, 1.2592, 1.4225, -0.3951], [-0.1242, -1.6240, 0.1932, 2.7181]],
        [[-1.6271, -1.0276, 0.0578, -0.2997], [-0.9684, -1.6946, -1.3188, -1.1938],
         [-1.6744, -0.8917, -0.6556, 1.0073], [-0.1205, 0.3671, -0.3731, -0.5347]],
    ],
    [
        [[0.7035, 0.2089, -0.1774, 3.4670], [-0.8505, -0.9278, 1.4714, 0.1644],
         [0.0898, 0.3531, -0.4007, 0.1927], [1.2569, -0.2636, -0.5223, 0.0616]],
        [[0.1760, -0.7639, -0.4600, -1.3260], [-0.9921, -0.2970, -0.8955, 1.0508],
         [1.3515, -0.1641, 1.9679, 1.1986], [-0.3616, 0.6287, 0.4933, 0.3360]],
        [[-0.5860, 0.2124, -0.8700, 2.4200], [-0.0551, -1.5103, -1.6779, 0.8399],
         [0.8431, 1.2414, -1.1243, -0.3887], [-2.1254, 0.6047, -0.3515, 0.7254]],
    ],
]  # fmt: skip
MMCV_BBOX = [
    [
        [[1.3080e01, 1.2688e01, 1.1214e01, 9.3944e01, -9.1905e-01],
         [3.8104e01, 1.0134e01, 1.4659e02, 9.0306e01, -9.8211e-01],
         [-5.3213e01, 4.9508e01, 5.1513e01, 3.2055e01, -3.1954e-01],
         [2.6974e01, 2.5248e01, 5.4495e01, 3.1083e00, -6.2127e-01]],
        [[-1.5604e01, -5.1908e01, 2.3998e02, 1.5008e01, -1.2546e00],
         [3.1354e01, -7.3635e00, 6.7879e01, 3.5081e01, -3.3851e-01],
         [-5.3292e00, 9.1946e00, 1.2834e01, 1.0485e01, -1.3039e00],
         [-2.3925e01, 3.6623e01, 3.9875e01, 7.2009e01, -6.5934e-01]],
        [[7.2114e01, -2.3781e01, 2.9106e01, 8.4501e01, -1.1340e00],
         [2.6258e01, -7.7034e00, 1.7629e02, 1.0615e02, -1.2156e00],
         [3.8057e01, 4.6016e01, 1.2965e01, 6.9384e00, -1.0855e00],
         [2.4428e01, -1.6189e01, 2.0572e02, 3.1622e01, -1.5719e-01]],
        [[3.8226e00, 2.9608e01, 1.4457e01, 6.8179e01, -9.1997e-01],
         [2.5003e01, -4.2490e01, 9.6007e01, 4.9086e01, -1.4786e00],
         [8.5983e01, 5.4980e01, 7.8080e01, 1.0003e02, -1.0926e00],
         [9.9065e00, 4.1457e01, 5.9799e00, 1.7973e01, -5.6313e-01]],
    ],
    [
        [[-1.8244e01, 4.6309e00, 5.3010e01, 2.4310e01, -7.0345e-01],
         [1.9419e01, 3.6704e01, 5.2390e01, 5.4133e01, -3.7730e-01],
         [5.6387e01, 2.3752e01, 9.0441e00, 1.7792e01, -1.5583e00],
         [3.6303e01, 1.6396e01, 2.0283e01, 1.9148e01, -8.3419e-01]],
        [[3.2169e01, 3.0521e01, 2.6283e01, 1.9680e02, -3.0454e-01],
         [2.5788e01, -3.2189e01, 8.8882e01, 1.0207e02, -1.5328e00],
         [8.4676e00, -1.6668e01, 2.4657e01, 1.1275e02, -4.0388e-01],
         [-1.0799e01, 6.0422e00, 9.5807e00, 3.3677e01, -3.5438e-01]],
        [[6.9363e01, 1.0850e01, 2.5968e01, 2.2311e01, -1.6408e-01],
         [2.8140e00, 4.6843e00, 3.1289e00, 2.1480e01, -6.7583e-01],
         [2.6661e01, 4.5290e01, 6.1679e00, 3.0005e01, -8.9806e-01],
         [5.0871e00, 1.3234e01, 9.2087e01, 4.9622e01, -2.8020e-01]],
        [[-1.2643e01, 2.5176e01, 5.0488e01, 5.4246e01, -4.4840e-01],
         [-3.4521e01, 9.8435e-01, 5.2413e01, 9.7996e00, -8.4218e-01],
         [4.9829e01, -1.0808e01, 2.9848e01, 7.3579e01, -6.2672e-01],
         [8.0446e01, 2.8064e01, 4.5273e01, 5.3809e01, -1.2359e00]],
    ],
]  # fmt: skip
MMCV_OUTPUT = [
    [
        [[1.1095, -0.2172, -0.5222, -0.6225], [0.9144, 0.7662, 1.0487, -0.9690],
         [-0.8949, -1.6384, -0.9093, -0.3961], [-0.8604, 0.5062, -0.7947, -0.7397]],
        [[-0.3961, -0.7495, 1.3461, 1.5528], [0.2034, 0.5522, -1.6722, 0.5231],
         [-1.0062, 1.1350, 1.4225, -0.3951], [-0.4826, -1.6240, 0.1932, 2.7181]],
        [[-2.6436, -1.0276, 0.0578, -0.8344], [-0.9684, -1.8151, -2.1843, -1.1938],
         [-1.6744, -1.0121, -0.6556, 1.0073], [-0.8474, 0.3671, -0.3731, -0.5347]],
    ],
    [
        [[0.7035, 0.2089, -0.1774, 3.4670], [-0.8505, -0.9278, 1.4714, 0.1644],
         [0.0898, 0.3064, -0.4007, 0.5849], [1.2569, -0.2636, -0.5223, 0.0616]],
        [[0.1760, -0.7639, -0.4600, -1.3260], [-0.9921, -0.2970, -0.8955, 1.0508],
         [1.3515, -0.6125, 1.9679, 0.5550], [-0.3616, 0.6287, 0.4933, 0.3360]],
        [[-0.5860, 0.2124, -0.8700, 2.4200], [-0.0551, -1.5103, -1.6779, 0.8399],
         [0.8431, 0.8455, -1.1243, -1.5994], [-2.1254, 0.6047, -0.3515, 0.7254]],
    ],
]  # fmt: skip
# the gradient is the same for every channel of an image
MMCV_GRAD_PLANES = [
    [[1.0000, 1.8507, 1.1493, 1.5222], [1.0000, 1.1511, 1.2139, 1.4778],
     [1.0000, 1.2629, 1.3721, 1.0000], [3.0000, 1.0000, 1.0000, 2.0000]],
    [[1.2687, 1.5055, 1.2382, 1.0000], [1.1458, 1.4258, 1.4160, 1.0000],
     [1.0000, 1.0000, 1.0000, 1.0000], [1.0000, 1.0000, 1.0000, 1.0000]],
]  # fmt: skip


def _mmcv_vectors(device="cpu", dtype=torch.float32):
    f = dict(device=device, dtype=dtype)
    grad = torch.tensor(MMCV_GRAD_PLANES, **f)[:, None].expand(2, 3, 4, 4)
    return torch.tensor(MMCV_FEATURE, **f), torch.tensor(MMCV_BBOX, **f), torch.tensor(MMCV_OUTPUT, **f), grad


def _check_mmcv_vectors(fn, device):
    x, boxes, expected, expected_grad = _mmcv_vectors(device)
    x.requires_grad_(True)
    out = fn(x, boxes)
    out.backward(torch.ones_like(out))
    # mmcv's tolerance (rtol 1e-2); its values are rounded to 4 decimals
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=2e-4)
    torch.testing.assert_close(x.grad, expected_grad, rtol=1e-2, atol=2e-4)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_mmcv_known_vectors(device):
    _check_mmcv_vectors(lambda x, b: mmops.rotated_feature_align(x, b, spatial_scale=1 / 8, points=1), device)


def test_mmcv_vectors_match_reference():
    x, boxes, expected, _ = _mmcv_vectors(dtype=torch.float64)
    torch.testing.assert_close(rotated_feature_align_ref(x, boxes, 1 / 8, 1), expected, rtol=0, atol=2e-4)


# --------------------------------------------------------------------------- special boxes


@pytest.mark.parametrize("points", [1, 5])
def test_boxes_outside_the_map_sample_nothing(points):
    x = torch.randn(2, 3, 5, 6)
    boxes = torch.zeros(2, 5, 6, 5)
    boxes[..., 0], boxes[..., 1] = -50.0, 300.0  # centre far outside (rows < -1, columns > W)
    boxes[..., 2:4] = 4.0  # small: the corners stay outside too
    out, grad = grad_of(x, boxes, torch.ones_like(x), 0.5, points)
    assert torch.equal(out, x) and torch.equal(grad, torch.ones_like(x))


def test_border_rules():
    """mmcv's rule: a point in [-1, 0) reads row / column 0, one at or past size - 1 the last one,
    one past size nothing."""
    x = torch.arange(12.0).reshape(1, 1, 3, 4)
    boxes = torch.zeros(1, 3, 4, 5)
    cases = [((-0.5, 1.0), x[0, 0, 0, 1]), ((1.0, -1.0), x[0, 0, 1, 0]), ((2.7, 3.0), x[0, 0, 2, 3]),
             ((3.0, 2.0), x[0, 0, 2, 2]), ((3.01, 2.0), 0.0), ((1.0, -1.01), 0.0)]  # fmt: skip
    for (r, c), value in cases:
        boxes[0, 0, 0, 0], boxes[0, 0, 0, 1] = r, c
        out = op(x, boxes, 1.0, 1)
        assert out[0, 0, 0, 0].item() == pytest.approx(float(value), abs=1e-6), (r, c)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_boxes(bad):
    """A point with a non-finite coordinate contributes 0 (the pixel keeps its value plus the
    other points' samples); the gradient stays finite."""
    g = torch.Generator().manual_seed(8)
    x = torch.randn(1, 2, 6, 6, generator=g)
    boxes = random_rboxes(1, 6, 6, 0.5, generator=g)
    for col in range(5):
        b = boxes.clone()
        b[0, 2, 3, col] = bad
        for points in (1, 5):
            out, grad = grad_of(x, b, torch.ones_like(x), 0.5, points)
            exp, gexp = ref_grad_of(x, b, torch.ones_like(x), 0.5, points)
            assert torch.isfinite(out).all() and torch.isfinite(grad).all()
            torch.testing.assert_close(out, exp.float(), **TOL[torch.float32])
            torch.testing.assert_close(grad, gexp.float(), **TOL[torch.float32])


def test_nan_features_propagate():
    x = torch.randn(1, 1, 4, 4)
    x[0, 0, 1, 1] = math.nan
    boxes = torch.zeros(1, 4, 4, 5)
    boxes[..., 0], boxes[..., 1] = 1.0, 1.0  # every pixel samples (1, 1)
    assert torch.isnan(op(x, boxes, 1.0, 1)).all()


def test_double_backward_refused():
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    boxes = random_rboxes(1, 4, 4, 1.0, torch.float64)
    go = torch.randn(1, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(x, boxes, 1.0, 5), x, go, create_graph=True)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("points", [1, 5])
@pytest.mark.parametrize("channels_last", [False, True])
def test_cuda_large_channels(points, channels_last):
    """More channels than a chunk / a warp, and more pixels than a block, against CPU."""
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 70, 33, 37, generator=g)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    boxes = random_rboxes(2, 33, 37, 0.125, generator=g)
    go = torch.randn(2, 70, 33, 37, generator=g)
    out, grad = grad_of(x, boxes, go, 0.125, points)
    out_c, grad_c = grad_of(x.cuda(), boxes.cuda(), go.cuda(), 0.125, points)
    assert out_c.is_contiguous(memory_format=torch.channels_last) == channels_last
    # 5 points: the float32 corners (|c| < 64, ulp 3.8e-6) differ by an ulp or two between
    # CUDA (sinf/cosf within 2 ulp, FMA-contracted corners and sums) and CPU, and a sample
    # moves by that times a neighbour difference (randn: up to ~8). Bilinear sampling is
    # continuous, so this is rounding: a CPU emulation of the CUDA rounding differs from CPU
    # by up to 2.4e-5, and CPU itself is 1.3e-5 from the float64 reference.
    tol = dict(rtol=1e-5, atol=5e-5 if points == 5 else 1e-5)
    torch.testing.assert_close(out_c.cpu(), out, **tol)
    torch.testing.assert_close(grad_c.cpu(), grad, **tol)
    ref, gref = ref_grad_of(x, boxes, go, 0.125, points)  # and as close to the exact value
    torch.testing.assert_close(out_c.cpu().double(), ref, **tol)
    torch.testing.assert_close(grad_c.cpu().double(), gref, **tol)


def _cuda_vs_cpu_tol(dtype, points):
    # float32: the rounding of test_cuda_large_channels; float64 / half types: TOL.
    if dtype == torch.float32:
        return dict(rtol=1e-5, atol=5e-5 if points == 5 else 1e-5)
    return TOL[dtype]


def _misaligned_channels_last(t):
    """t in channels-last order one element past an aligned address (no vector loads)."""
    N, C, H, W = t.shape
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    out = flat[1:].view(N, H, W, C).permute(0, 3, 1, 2)
    out.copy_(t)
    assert out.is_contiguous(memory_format=torch.channels_last)
    return out


# Channel counts of every CUDA path: below the NCHW backward transpose threshold (3),
# between it and the forward one, odd (17: scalar packs), and above both with packs
# of 4 (64), 2 (66) and 1 (129).
@pytest.mark.cuda
@pytest.mark.parametrize("channels", [3, 17, 64, 66, 129])
@pytest.mark.parametrize("layout", ["nchw", "channels_last", "misaligned"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_cuda_paths_match_cpu(channels, layout, dtype):
    g = torch.Generator().manual_seed(12 + channels)
    N, H, W = 2, 9, 11
    x = torch.randn(N, channels, H, W, generator=g).to(dtype)
    boxes = random_rboxes(N, H, W, 0.5, generator=g).to(dtype)
    go = torch.randn(N, channels, H, W, generator=g).to(dtype)
    out, grad = grad_of(x, boxes, go, 0.5, 5)
    xc, goc = x.cuda(), go.cuda()
    if layout == "channels_last":
        xc, goc = xc.contiguous(memory_format=torch.channels_last), goc.contiguous(memory_format=torch.channels_last)
    elif layout == "misaligned":
        xc, goc = _misaligned_channels_last(xc), _misaligned_channels_last(goc)
    out_c, grad_c = grad_of(xc, boxes.cuda(), goc, 0.5, 5)
    channels_last = layout != "nchw"
    assert out_c.dtype == dtype and grad_c.dtype == dtype
    assert out_c.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    assert grad_c.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    tol = _cuda_vs_cpu_tol(dtype, 5)
    torch.testing.assert_close(out_c.cpu(), out, **tol)
    torch.testing.assert_close(grad_c.cpu(), grad, **tol)
    assert (grad.double() - go.double()).abs().sum() > 0  # the samples added something


@pytest.mark.cuda
@pytest.mark.parametrize("points", [1, 5])
def test_cuda_mixed_layouts(points):
    """An NCHW forward with a channels-last grad_output and the reverse (the backward follows
    grad_output's layout)."""
    g = torch.Generator().manual_seed(13)
    x = torch.randn(2, 68, 10, 12, generator=g)
    boxes = random_rboxes(2, 10, 12, 0.25, generator=g)
    go = torch.randn(2, 68, 10, 12, generator=g)
    out, grad = grad_of(x, boxes, go, 0.25, points)
    tol = _cuda_vs_cpu_tol(torch.float32, points)
    cl = torch.channels_last
    for xc, goc in (
        (x.cuda(), go.cuda().contiguous(memory_format=cl)),
        (x.cuda().contiguous(memory_format=cl), go.cuda()),
    ):
        out_c, grad_c = grad_of(xc, boxes.cuda(), goc, 0.25, points)
        torch.testing.assert_close(out_c.cpu(), out, **tol)
        torch.testing.assert_close(grad_c.cpu(), grad, **tol)


@pytest.mark.cuda
def test_cuda_backward_alerts_under_deterministic_algorithms():
    from conftest import deterministic_algorithms

    x = torch.randn(1, 2, 4, 4, device="cuda", requires_grad=True)
    boxes = random_rboxes(1, 4, 4, 1.0).cuda()
    out = op(x, boxes, 1.0, 1)
    with deterministic_algorithms(), pytest.raises(RuntimeError, match="rotated_feature_align"):
        out.sum().backward()


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    rfa_module = importlib.import_module("mmcv.ops.rotated_feature_align")

    _check_mmcv_vectors(lambda x, b: ops.rotated_feature_align(x, b, spatial_scale=1 / 8, points=1), "cpu")
    _check_mmcv_vectors(lambda x, b: rfa_module.RotatedFeatureAlignFunction.apply(x, b, 1 / 8, 1), "cpu")
    # mmcv's kernel contract: fills output / bottom_grad
    x, boxes, expected, expected_grad = _mmcv_vectors()
    ext = rfa_module.ext_module
    out = torch.zeros_like(x)
    ext.rotated_feature_align_forward(x, boxes, out, spatial_scale=1 / 8, points=1)
    torch.testing.assert_close(out, mmops.rotated_feature_align(x, boxes, 1 / 8, 1), rtol=0, atol=0)
    grad = torch.zeros_like(x)
    ext.rotated_feature_align_backward(torch.ones_like(x), boxes, grad, spatial_scale=1 / 8, points=1)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-2, atol=2e-4)
    g = torch.Generator().manual_seed(10)
    x5 = torch.randn(2, 3, 6, 7, generator=g)
    b5 = random_rboxes(2, 6, 7, 0.5, generator=g)
    torch.testing.assert_close(ops.rotated_feature_align(x5, b5, 0.5, 5), op(x5, b5, 0.5, 5), rtol=0, atol=0)
