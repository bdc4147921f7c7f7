"""Tests of mmops::border_align: the conformance cases, then the float64 loop reference
(border_align_reference.py), mmcv's known vectors, gradcheck, the tie / NaN / out-of-map
rules, CUDA == CPU, the deterministic backward and the mmcv bridge."""

import importlib
import math

import pytest
import torch
from border_align_reference import (
    border_align_composite,
    border_align_ref,
    detector_boxes,
    random_boxes,
)
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, deterministic_algorithms

import mmops

op = torch.ops.mmops.border_align
fwd_op = torch.ops.mmops._border_align_forward
bwd_op = torch.ops.mmops._border_align_backward
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


# --------------------------------------------------------------------------- inputs


def make_inputs(n, c, h, w, kind="detector", seed=0, dtype=torch.float32):
    """input [n, 4c, h, w] (distinct-ish values) and boxes [n, h * w, 4] of a distribution."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4 * c, h, w, generator=g, dtype=torch.float64)
    if kind == "detector":
        boxes = detector_boxes(n, h, w, g)
    elif kind == "random":
        boxes = random_boxes(n, h, w, g)
    else:  # "wild": corners anywhere in [-3, size + 3], reversed and degenerate boxes too
        lo = torch.tensor([-3.0, -3.0, -3.0, -3.0], dtype=torch.float64)
        span = torch.tensor([w + 6.0, h + 6.0, w + 6.0, h + 6.0], dtype=torch.float64)
        boxes = lo + span * torch.rand(n, h * w, 4, generator=g, dtype=torch.float64)
        boxes[:, ::5, 2] = boxes[:, ::5, 0]  # zero width
        boxes[:, 1::7, 3] = boxes[:, 1::7, 1]  # zero height
    return x.to(dtype), boxes.to(dtype)


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    # no size 4 (boxes' last dim: torch.compile would give both one symbol and specialise it)
    n, c, h, w = (2, 3, 5, 6) if size == 0 else (3, 2, 7, 3)
    x, boxes = make_inputs(n, c, h, w, "wild", seed=30 + size, dtype=dtype)
    return Sample((x.to(device), boxes.to(device), 3))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample((torch.randn(0, 8, 3, 4, **f), torch.zeros(0, 12, 4, **f), 2), out_shapes=[(0, 2, 12, 4)]),
        Sample((torch.randn(2, 0, 3, 4, **f), torch.rand(2, 12, 4, **f), 2), out_shapes=[(2, 0, 12, 4)]),
        Sample((torch.randn(2, 8, 0, 4, **f), torch.zeros(2, 0, 4, **f), 2), out_shapes=[(2, 2, 0, 4)]),
    ]


# CUDA forward paths: C < 32 (NCHW kernel), 32 <= C (channels-last kernel; one channel per
# lane, or VEC = 4 (2 for float64) channels per lane when VEC divides C and C >= 32 * VEC)
CUDA_PATH_SHAPES = [  # (N, C, H, W, boxes, pool_size)
    (2, 3, 5, 6, "wild", 3),
    (2, 6, 11, 13, "detector", 10),
    (1, 5, 9, 17, "random", 4),
    (1, 40, 6, 7, "detector", 3),
    (2, 128, 5, 9, "wild", 10),
    (1, 130, 4, 6, "random", 2),
]


def _cuda_samples(dtype):
    """Every forward path, both box distributions, maps of several box tiles and channel
    counts that leave partial channel tiles."""
    for n, c, h, w, kind, pool in CUDA_PATH_SHAPES:
        x, boxes = make_inputs(n, c, h, w, kind, seed=40 + c, dtype=dtype)
        yield Sample((x, boxes, pool))


def _cuda_tol(dtype, what, expected, sample):
    if what.startswith("output"):
        return dict(rtol=0, atol=0)  # the same float arithmetic on both devices
    return TOL[dtype]


class _Net(torch.nn.Module):
    """border_align in a model: BorderAlign, the functional wrapper and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.align = mmops.BorderAlign(3)

    def forward(self, x: torch.Tensor, boxes: torch.Tensor):
        a = self.align(x * 2.0, boxes)
        b = mmops.border_align(x.sin(), boxes, 3)
        return a + b, torch.ops.mmops.border_align(x, boxes * 0.5, 2).sum(dim=-1)


def _helpers(sample):
    x, boxes, pool = sample.args
    out, argmax = fwd_op(x, boxes, pool)
    return [(fwd_op, sample.args), (bwd_op, (torch.randn_like(out), boxes, argmax, pool, list(x.shape)))]


def _message(text):
    return f"mmops::border_align: .*{text}"


CONFORMANCE = [
    ConformanceCase(
        "border_align",
        op,
        _sample,
        grad_args=(0,),
        feature_args=(0,),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cuda_tol=_cuda_tol,
        nonzero_grads=True,
        bad_inputs={
            "input_3d": BadInput(lambda x, b, p: (x[0], b, p), _message("input to be a 4-D"), meta=True),
            "int_input": BadInput(lambda x, b, p: (x.int(), b.int(), p), _message("input"), meta=True),
            "channels": BadInput(lambda x, b, p: (x[:, 1:], b, p), _message("multiple of 4"), meta=True),
            "boxes_2d": BadInput(lambda x, b, p: (x, b[0], p), _message("boxes to be a 3-D"), meta=True),
            "boxes_count": BadInput(lambda x, b, p: (x, b[:, 1:], p), _message("H \\* W = 30 boxes"), meta=True),
            "boxes_columns": BadInput(lambda x, b, p: (x, b[..., :3], p), _message("boxes of shape"), meta=True),
            "boxes_batch": BadInput(lambda x, b, p: (x, b[:1], p), _message("N = 2 images"), meta=True),
            "boxes_dtype": BadInput(lambda x, b, p: (x, b.double(), p), _message("boxes to have the dtype"), meta=True),
            "pool_size_0": BadInput(lambda x, b, p: (x, b, 0), _message("pool_size"), meta=True),
            "pool_size_negative": BadInput(lambda x, b, p: (x, b, -2), _message("pool_size"), meta=True),
            "pool_size_huge": BadInput(lambda x, b, p: (x, b, 2**31), _message("pool_size"), meta=True),
        },
    ),
]


class TestBorderAlignConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def grad_of(x, boxes, pool, go):
    x = x.detach().requires_grad_(True)
    out = op(x, boxes, pool)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


def ref_grad_of(x, boxes, pool, go):
    xd = x.detach().double().requires_grad_(True)
    out = border_align_ref(xd, boxes.double(), pool)
    (g,) = torch.autograd.grad(out, xd, go.double())
    return out.detach(), g


# (N, C, H, W, pool_size, boxes)
SHAPES = [
    (2, 3, 4, 5, 1, "wild"),
    (1, 2, 6, 7, 10, "detector"),
    (2, 1, 5, 4, 3, "random"),
    (1, 5, 3, 9, 2, "wild"),
    (1, 2, 1, 6, 4, "wild"),  # one row: every point clamps or falls outside along y
    (1, 1, 7, 1, 5, "wild"),  # one column
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(dtype):
    for i, (n, c, h, w, pool, kind) in enumerate(SHAPES):
        x, boxes = make_inputs(n, c, h, w, kind, seed=i, dtype=dtype)
        go = torch.randn(n, c, h * w, 4, generator=torch.Generator().manual_seed(100 + i)).to(dtype)
        out, grad = grad_of(x, boxes, pool, go)
        exp, gexp = ref_grad_of(x, boxes, pool, go)
        assert out.dtype == dtype and out.shape == (n, c, h * w, 4) and grad.dtype == dtype
        if dtype == torch.float64:  # the same float64 arithmetic: exact
            torch.testing.assert_close(out, exp, rtol=0, atol=0)
            torch.testing.assert_close(grad, gexp, rtol=1e-12, atol=1e-12)
        else:
            torch.testing.assert_close(out.double(), exp, **TOL[dtype])
            if dtype == torch.float32:  # 16-bit near-ties may pick another point than float64
                torch.testing.assert_close(grad.double(), gexp, **TOL[dtype])


def test_argmax_matches_reference():
    for i, (n, c, h, w, pool, kind) in enumerate(SHAPES):
        x, boxes = make_inputs(n, c, h, w, kind, seed=i, dtype=torch.float64)
        out, argmax = fwd_op(x, boxes, pool)
        exp, exp_arg = border_align_ref(x, boxes, pool, with_argmax=True)
        assert argmax.dtype == torch.int32 and argmax.shape == out.shape
        assert torch.equal(argmax.long(), exp_arg), i
        assert argmax.min() >= 0 and argmax.max() <= pool
        torch.testing.assert_close(out, exp, rtol=0, atol=0)
        torch.testing.assert_close(op(x, boxes, pool), out, rtol=0, atol=0)  # the public op: no argmax


def test_matches_grid_sample_composite():
    # an independent vectorised formulation, larger maps, both distributions
    for kind in ("detector", "random"):
        x, boxes = make_inputs(2, 4, 12, 17, kind, seed=5, dtype=torch.float64)
        torch.testing.assert_close(op(x, boxes, 10), border_align_composite(x, boxes, 10), rtol=1e-12, atol=1e-12)


# mmcv's tests/test_ops/test_border_align.py: input [1, 4C = 4, 3, 4], boxes [1, 12, 4];
# output [1, 1, 12, 4] and the gradient of output.sum() for pool_size 1 and 2.
MMCV_INPUT = [
    [
        [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]],
        [[6, 7, 5, 8], [2, 1, 3, 4], [12, 9, 11, 10]],
        [[-2, -3, 2, 0], [-4, -5, 1, -1], [-1, -1, -1, -1]],
        [[0, -1, 2, 1], [-4, -3, -2, -1], [-1, -2, -3, -4]],
    ]
]
MMCV_BOXES = [
    [
        [0, 0, 2, 1],
        [1, 0, 3, 1],
        [1, 0, 2, 1],
        [0, 0, 3, 1],
        [0, 0, 1, 2],
        [0, 0, 2, 2],
        [1, 0, 2, 1],
        [1, 0, 3, 1],
        [0, 1, 1, 2],
        [0, 0, 3, 2],
        [1, 0, 3, 2],
        [2, 0, 3, 2],
    ]
]
MMCV_OUTPUT = {
    1: [
        [
            [
                [3.0, 6.0, 1.0, 2.0],
                [4.0, 7.0, -1.0, 1.0],
                [3.0, 7.0, 1.0, 2.0],
                [4.0, 6.0, -1.0, 1.0],
                [2.0, 12.0, -1.0, -1.0],
                [3.0, 12.0, -1.0, 2.0],
                [3.0, 7.0, 1.0, 2.0],
                [4.0, 7.0, -1.0, 1.0],
                [6.0, 12.0, -1.0, -2.0],
                [4.0, 12.0, -1.0, 1.0],
                [4.0, 9.0, -1.0, 1.0],
                [4.0, 11.0, -1.0, 1.0],
            ]
        ]
    ],
    2: [
        [
            [
                [3.0, 6.0, 1.0, 2.0],
                [4.0, 7.0, 1.0, 1.0],
                [3.0, 7.0, 1.0, 2.0],
                [4.0, 6.0, -1.0, 1.0],
                [2.0, 12.0, -1.0, -1.0],
                [3.0, 12.0, -1.0, 2.0],
                [3.0, 7.0, 1.0, 2.0],
                [4.0, 7.0, 1.0, 1.0],
                [6.0, 12.0, -1.0, -2.0],
                [4.0, 12.0, -1.0, 1.0],
                [4.0, 9.0, -1.0, 1.0],
                [4.0, 11.0, -1.0, 1.0],
            ]
        ]
    ],
}
MMCV_GRAD = {
    1: [
        [
            [[0.0, 1.0, 4.0, 6.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]],
            [[2.0, 4.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [4.0, 1.0, 1.0, 0.0]],
            [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 3.0, 3.0], [0.0, 2.0, 1.0, 3.0]],
            [[0.0, 1.0, 4.0, 6.0], [0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]],
        ]
    ],
    2: [
        [
            [[0.0, 1.0, 4.0, 6.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]],
            [[2.0, 4.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [4.0, 1.0, 1.0, 0.0]],
            [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 5.0, 1.0], [0.0, 2.0, 1.0, 3.0]],
            [[0.0, 1.0, 4.0, 6.0], [0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]],
        ]
    ],
}


def _check_mmcv_vectors(fn, device, dtype, pool):
    x = torch.tensor(MMCV_INPUT, dtype=dtype, device=device, requires_grad=True)
    boxes = torch.tensor(MMCV_BOXES, dtype=dtype, device=device)
    out = fn(x, boxes, pool)
    out.backward(torch.ones_like(out))
    # small integers, exact in every dtype; the ties (equal points) follow mmcv's first-wins rule
    torch.testing.assert_close(out.cpu(), torch.tensor(MMCV_OUTPUT[pool], dtype=dtype), rtol=0, atol=0)
    torch.testing.assert_close(x.grad.cpu(), torch.tensor(MMCV_GRAD[pool], dtype=dtype), rtol=0, atol=0)


@pytest.mark.parametrize("pool", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_mmcv_known_vectors(dtype, pool):
    _check_mmcv_vectors(mmops.border_align, "cpu", dtype, pool)
    _check_mmcv_vectors(lambda x, b, p: mmops.BorderAlign(p)(x, b), "cpu", dtype, pool)


def test_reference_reproduces_mmcv_vectors():
    for pool in (1, 2):
        x = torch.tensor(MMCV_INPUT, dtype=torch.float64, requires_grad=True)
        out = border_align_ref(x, torch.tensor(MMCV_BOXES, dtype=torch.float64), pool)
        (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))
        torch.testing.assert_close(out, torch.tensor(MMCV_OUTPUT[pool], dtype=torch.float64), rtol=0, atol=0)
        torch.testing.assert_close(grad, torch.tensor(MMCV_GRAD[pool], dtype=torch.float64), rtol=0, atol=0)


@pytest.mark.parametrize("pool", [1, 3, 10])
def test_gradcheck(pool):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 8, 4, 5, dtype=torch.float64, generator=g, requires_grad=True)
    boxes = detector_boxes(2, 4, 5, g)
    assert torch.autograd.gradcheck(lambda t: op(t, boxes, pool), (x,))
    y = torch.randn(1, 4, 3, 6, dtype=torch.float64, generator=g, requires_grad=True)
    wild = make_inputs(1, 1, 3, 6, "wild", seed=4, dtype=torch.float64)[1]
    assert torch.autograd.gradcheck(lambda t: op(t, wild, pool), (y,))


# --------------------------------------------------------------------------- rules


def test_channel_groups_and_border_order():
    # each group holds one constant: the output's last dim reads (top, left, bottom, right)
    x = torch.cat([torch.full((1, 2, 3, 3), v) for v in (1.0, 2.0, 3.0, 4.0)], dim=1)
    boxes = torch.tensor([[[0.5, 0.5, 1.5, 1.5]] * 9])
    out = op(x, boxes, 4)
    assert out.shape == (1, 2, 9, 4)
    assert torch.equal(out, torch.tensor([1.0, 2.0, 3.0, 4.0]).expand(1, 2, 9, 4))


def test_sample_positions_and_walk_direction():
    # a ramp along x (top / bottom groups) and along y (left / right): the maximum sits at the
    # border's far end, which is the last point for top / left, the first for bottom / right
    h, w = 5, 6
    ramp_x = torch.arange(w, dtype=torch.float64).expand(h, w)
    ramp_y = torch.arange(h, dtype=torch.float64)[:, None].expand(h, w)
    x = torch.stack([ramp_x, ramp_y, ramp_x, ramp_y])[None]
    boxes = torch.tensor([[[0.5, 1.0, 3.5, 3.5]] * (h * w)], dtype=torch.float64)
    out, argmax = fwd_op(x, boxes, 5)
    # top: x = 0.5 + 0.6 + ... (five additions, as mmcv) = 3.5000000000000004; the rest exact
    assert out[0, 0, 0].tolist() == [0.5 + 0.6 + 0.6 + 0.6 + 0.6 + 0.6, 3.5, 3.5, 3.5]
    assert argmax[0, 0, 0].tolist() == [5, 5, 0, 0]


def test_out_of_map_points_are_zero_and_clamped_strip():
    # points in [-1, 0) clamp to the first pixel; beyond -1 they are worth 0, and 0 takes part
    x = torch.full((1, 4, 2, 2), -5.0, dtype=torch.float64)
    x[0, 0, 0, 0] = -1.0
    inside_strip = torch.tensor([[[-0.75, -0.5, -0.25, 1.0]] * 4], dtype=torch.float64)  # top: y = -0.5
    assert op(x, inside_strip, 2)[0, 0, 0, 0].item() == -1.0  # clamped onto row 0, pixel (0, 0) wins
    far = torch.tensor([[[-3.0, -2.0, -1.5, 1.0]] * 4], dtype=torch.float64)  # top: y = -2: all outside
    out, argmax = fwd_op(x, far, 3)
    assert out[0, 0, 0, 0].item() == 0.0 and argmax[0, 0, 0, 0].item() == 0
    x.requires_grad_(True)
    op(x, far, 3)[0, 0, 0, 0].backward()
    assert x.grad.abs().sum().item() == 0.0  # an outside winner sends no gradient


def test_ties_go_to_the_first_point_of_the_walk():
    x = torch.zeros(1, 4, 4, 4, dtype=torch.float64, requires_grad=True)
    boxes = torch.tensor([[[0.0, 0.0, 3.0, 3.0]] * 16], dtype=torch.float64)
    out, argmax = fwd_op(x, boxes, 3)
    assert (argmax == 0).all()
    op(x, boxes, 3)[:, :, :1].sum().backward()
    grad = x.grad[0]
    # top / left start at (x1, y1) = (0, 0); bottom / right at (x2, y2) = (3, 3)
    assert grad[0, 0, 0] == 1 and grad[1, 0, 0] == 1 and grad[2, 3, 3] == 1 and grad[3, 3, 3] == 1
    assert grad.sum() == 4


def test_nan_wins_and_inf_or_nan_boxes_are_defined():
    x = torch.randn(1, 4, 3, 3, dtype=torch.float64)
    x[0, 0, 1, 1] = math.nan
    boxes = torch.tensor([[[0.0, 1.0, 2.0, 2.0]] * 9], dtype=torch.float64)  # top border crosses (1, 1)
    out = op(x, boxes, 2)
    assert torch.isnan(out[0, 0, :, 0]).all() and not torch.isnan(out[0, 0, :, 1:]).any()
    bad = torch.tensor([[[math.nan, 0.0, 1.0, 1.0], [0.0, 0.0, math.inf, 1.0], [-math.inf, 0.0, 1.0, math.nan]]])
    y = torch.randn(1, 4, 1, 3, dtype=torch.float64, requires_grad=True)
    out, argmax = fwd_op(y, bad.double(), 2)
    exp, exp_arg = border_align_ref(y.detach(), bad.double(), 2, with_argmax=True)
    torch.testing.assert_close(out, exp, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(argmax.long(), exp_arg)
    # x1 = NaN: every point of the borders from (x1, y1) is worth 0; the bottom border keeps
    # its start (x2, y2) and its NaN step makes its other points worth 0; the right border
    # (x = x2, y from y2 = 1 to y1 = 0) is finite and clamps onto row 0: all its points are
    # pixel (0, 1) of group 3
    assert out[0, 0, 0, :2].tolist() == [0.0, 0.0]
    start = y.detach()[0, 2:, 0, 1]  # (x2, y2) = (1, 1) clamps onto row 0: pixel (0, 1) of groups 2, 3
    assert out[0, 0, 0, 2:].tolist() == [max(start[0].item(), 0.0), start[1].item()]
    op(y, bad.double(), 2).sum().backward()
    assert torch.isfinite(y.grad).all()


def test_strided_and_channels_last_inputs():
    x, boxes = make_inputs(2, 3, 5, 6, "detector", seed=6)
    wide = torch.randn(2, 24, 5, 12)[:, ::2, :, ::2]
    wide.copy_(x)
    assert not wide.is_contiguous()
    exp = op(x, boxes, 4)
    torch.testing.assert_close(op(wide, boxes, 4), exp, rtol=0, atol=0)
    torch.testing.assert_close(op(x.contiguous(memory_format=torch.channels_last), boxes, 4), exp, rtol=0, atol=0)
    strided_boxes = torch.randn(2, 30, 8)[..., ::2]
    strided_boxes.copy_(boxes)
    torch.testing.assert_close(op(x, strided_boxes, 4), exp, rtol=0, atol=0)


def test_backward_of_noncontiguous_grad_output():
    x, boxes = make_inputs(1, 2, 4, 4, "detector", seed=7, dtype=torch.float64)
    go = torch.randn(1, 2, 4, 16, dtype=torch.float64).transpose(2, 3)
    _, g1 = grad_of(x, boxes, 3, go)
    _, g2 = grad_of(x, boxes, 3, go.contiguous())
    torch.testing.assert_close(g1, g2, rtol=0, atol=0)


def test_module_and_functional():
    x, boxes = make_inputs(1, 2, 3, 4, "detector", seed=8)
    module = mmops.BorderAlign(10)
    assert repr(module) == "BorderAlign(pool_size=10)"
    torch.testing.assert_close(module(x, boxes), mmops.border_align(x, boxes, 10), rtol=0, atol=0)
    scripted = torch.jit.script(module)
    torch.testing.assert_close(scripted(x, boxes), module(x, boxes), rtol=0, atol=0)


def test_deterministic_mode_gives_the_same_gradient():
    x, boxes = make_inputs(2, 2, 5, 5, "detector", seed=9, dtype=torch.float64)
    go = torch.randn(2, 2, 25, 4, dtype=torch.float64)
    _, g = grad_of(x, boxes, 4, go)
    with deterministic_algorithms():
        _, g_det = grad_of(x, boxes, 4, go)
    torch.testing.assert_close(g_det, g, rtol=0, atol=0)  # the CPU backward is deterministic anyway


def test_cpu_results_do_not_depend_on_the_thread_count():
    x, boxes = make_inputs(2, 20, 6, 7, "random", seed=19)
    go = torch.randn(2, 20, 42, 4, generator=torch.Generator().manual_seed(20))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        out1, g1 = grad_of(x, boxes, 5, go)
        torch.set_num_threads(max(2, threads))
        out2, g2 = grad_of(x, boxes, 5, go)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(out1, out2) and torch.equal(g1, g2)


def test_autocast_runs_mixed_inputs_in_float32():
    x, boxes = make_inputs(1, 2, 3, 4, "detector", seed=10)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x.bfloat16(), boxes, 3)  # bfloat16 features, float32 boxes
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, op(x.bfloat16().float(), boxes, 3).bfloat16(), rtol=0, atol=0)


def test_double_backward_refused():
    x, boxes = make_inputs(1, 1, 3, 3, "detector", seed=11, dtype=torch.float64)
    x.requires_grad_(True)
    go = torch.randn(1, 1, 9, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(x, boxes, 2), x, go, create_graph=True)


def test_backward_helper_checks():
    x, boxes = make_inputs(1, 2, 3, 4, "detector", seed=12)
    out, argmax = fwd_op(x, boxes, 2)
    go = torch.randn_like(out)
    with pytest.raises(RuntimeError, match="mmops::border_align: .*grad_output of shape"):
        bwd_op(go[:, :1], boxes, argmax, 2, list(x.shape))
    with pytest.raises(RuntimeError, match="mmops::border_align: .*argmax_idx to be an int32"):
        bwd_op(go, boxes, argmax.long(), 2, list(x.shape))
    with pytest.raises(RuntimeError, match="mmops::border_align: .*argmax_idx of shape"):
        bwd_op(go, boxes, argmax[:, :1], 2, list(x.shape))
    with pytest.raises(RuntimeError, match="mmops::border_align: .*input_shape"):
        bwd_op(go, boxes, argmax, 2, [1, 7, 3, 4])
    with pytest.raises(RuntimeError, match="mmops::border_align: .*pool_size"):
        bwd_op(go, boxes, argmax, 0, list(x.shape))
    # an argmax_idx outside [0, pool_size] sends nothing
    grad = bwd_op(go, boxes, torch.full_like(argmax, 7), 2, list(x.shape))
    assert grad.shape == x.shape and (grad == 0).all()


def test_huge_map_gives_our_error():
    x = torch.empty(1, 4, 1, 2**31, device="meta")
    with pytest.raises(RuntimeError, match="mmops::border_align: .*at most 2\\^30"):
        op(x, torch.empty(1, 2**31, 4, device="meta"), 2)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["detector", "random", "wild"])
def test_cuda_matches_cpu(dtype, kind):
    shapes = [(2, 5, 9, 70, 10), (1, 3, 33, 17, 1), (3, 8, 4, 4, 7), (1, 64, 9, 70, 10), (2, 256, 6, 11, 10)]
    shapes += [(n, c, h, w, pool) for n, c, h, w, _, pool in CUDA_PATH_SHAPES]
    for n, c, h, w, pool in shapes:
        x, boxes = make_inputs(n, c, h, w, kind, seed=13, dtype=dtype)
        go = torch.randn(n, c, h * w, 4, generator=torch.Generator().manual_seed(14)).to(dtype)
        out, arg = fwd_op(x, boxes, pool)
        out_c, arg_c = fwd_op(x.cuda(), boxes.cuda(), pool)
        torch.testing.assert_close(out_c.cpu(), out, rtol=0, atol=0)  # bitwise: the same arithmetic
        assert torch.equal(arg_c.cpu(), arg)
        torch.testing.assert_close(op(x.cuda(), boxes.cuda(), pool).cpu(), out, rtol=0, atol=0)
        _, grad = grad_of(x, boxes, pool, go)
        _, grad_c = grad_of(x.cuda(), boxes.cuda(), pool, go.cuda())
        torch.testing.assert_close(grad_c.cpu(), grad, **TOL[dtype])


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_channels_last_and_misaligned_inputs(dtype):
    # the channels-last kernel reads a channels-last input in place; a view whose data is not
    # aligned to the channel vector takes the one-channel-per-lane path
    x, boxes = make_inputs(2, 128, 5, 6, "detector", seed=18, dtype=dtype)
    expected = op(x, boxes, 10)
    xc, bc = x.cuda(), boxes.cuda()
    torch.testing.assert_close(
        op(xc.contiguous(memory_format=torch.channels_last), bc, 10).cpu(), expected, rtol=0, atol=0
    )
    n, c4, h, w = x.shape
    flat = torch.empty(n * h * w * c4 + 1, dtype=dtype, device="cuda")[1:]
    shifted = flat.view(n, h, w, c4).permute(0, 3, 1, 2)
    shifted.copy_(xc)
    assert shifted.is_contiguous(memory_format=torch.channels_last) and shifted.data_ptr() % 16 != 0
    torch.testing.assert_close(op(shifted, bc, 10).cpu(), expected, rtol=0, atol=0)
    torch.testing.assert_close(
        op(xc[:, :, :, 1:], bc[:, : h * (w - 1)], 10).cpu(),
        op(x[:, :, :, 1:], boxes[:, : h * (w - 1)], 10),
        rtol=0,
        atol=0,
    )


@pytest.mark.cuda
@pytest.mark.parametrize("pool", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_mmcv_known_vectors(dtype, pool):
    _check_mmcv_vectors(mmops.border_align, "cuda", dtype, pool)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_deterministic_backward(dtype):
    x, boxes = make_inputs(2, 6, 20, 30, "detector", seed=15, dtype=dtype)
    go = torch.randn(2, 6, 600, 4, generator=torch.Generator().manual_seed(16)).to(dtype)
    _, expected = grad_of(x, boxes, 10, go)  # CPU: deterministic
    with deterministic_algorithms():
        _, g1 = grad_of(x.cuda(), boxes.cuda(), 10, go.cuda())
        _, g2 = grad_of(x.cuda(), boxes.cuda(), 10, go.cuda())
    assert torch.equal(g1, g2)  # bitwise repeatable
    torch.testing.assert_close(g1.cpu(), expected, **TOL[dtype])
    go[0, 0, 0, 0] = math.inf  # a non-finite gradient: NaN everywhere (documented)
    with deterministic_algorithms():
        _, g_inf = grad_of(x.cuda(), boxes.cuda(), 10, go.cuda())
    assert torch.isnan(g_inf).all()


@pytest.mark.cuda
def test_cuda_large_grid_and_empty():
    # more tiles than the grid-stride cap would launch at once, and empty inputs
    x = torch.randn(1, 4, 2, 8, device="cuda")
    boxes = torch.rand(1, 16, 4, device="cuda") * 8
    torch.testing.assert_close(op(x, boxes, 2).cpu(), op(x.cpu(), boxes.cpu(), 2), rtol=0, atol=0)
    e = torch.randn(2, 0, 3, 3, device="cuda", requires_grad=True)
    out = op(e, torch.rand(2, 9, 4, device="cuda"), 2)
    assert out.shape == (2, 0, 9, 4)
    out.sum().backward()
    assert e.grad.shape == e.shape


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.border_align")
    for pool in (1, 2):
        _check_mmcv_vectors(ops.border_align, "cpu", torch.float32, pool)
        _check_mmcv_vectors(lambda x, b, p: ops.BorderAlign(p)(x, b), "cpu", torch.float64, pool)
    assert repr(ops.BorderAlign(10)) == "BorderAlign(pool_size=10)"
    x, boxes = make_inputs(2, 3, 4, 5, "detector", seed=17, dtype=torch.float64)
    exp, exp_arg = fwd_op(x, boxes, 4)
    torch.testing.assert_close(module.BorderAlignFunction.apply(x, boxes, 4), exp, rtol=0, atol=0)
    # mmcv's kernel contract: fills output / argmax_idx, then grad_input
    out = x.new_zeros(exp.shape)
    argmax = torch.zeros(exp.shape, dtype=torch.int)
    module.ext_module.border_align_forward(x, boxes, out, argmax, pool_size=4)
    torch.testing.assert_close(out, exp, rtol=0, atol=0)
    assert torch.equal(argmax, exp_arg)
    go = torch.randn_like(out)
    grad_in = torch.zeros_like(x)
    module.ext_module.border_align_backward(go, boxes, argmax, grad_in, pool_size=4)
    torch.testing.assert_close(grad_in, bwd_op(go, boxes, exp_arg, 4, list(x.shape)), rtol=0, atol=0)
