"""mmops.diff_iou_rotated_2d / _3d: conformance, the exact reference, mmcv's
known vectors, gradcheck, gradients against finite differences of the exact
IoU and against autograd of the candidate-vertex composite, edge cases, the
mmcv.ops bridge and CUDA == CPU."""

import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL
from diff_iou_rotated_reference import composite_iou_2d, composite_iou_3d, exact_iou_2d, exact_iou_3d

import mmops

op2 = torch.ops.mmops.diff_iou_rotated_2d
op3 = torch.ops.mmops.diff_iou_rotated_3d
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def random_pairs(b, n, *, three_d=False, dtype=torch.float64, seed=0, spread=3.0, device="cpu"):
    """Aligned pairs: box2 is box1 moved by up to `spread` (overlapping, contained
    or apart), both sizes in [1, 6), angles in [-pi, pi)."""
    g = torch.Generator().manual_seed(seed)

    def boxes(centre):
        size = 1 + 5 * torch.rand(b, n, 3 if three_d else 2, generator=g, dtype=torch.float64)
        angle = (torch.rand(b, n, 1, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
        return torch.cat([centre, size, angle], dim=-1)

    centre = 10 * torch.rand(b, n, 3 if three_d else 2, generator=g, dtype=torch.float64)
    moved = centre + spread * (2 * torch.rand(centre.shape, generator=g, dtype=torch.float64) - 1)
    return boxes(centre).to(device, dtype), boxes(moved).to(device, dtype)


# ----------------------------------------------------------------------------- conformance


def _sample(three_d):
    def sample(device, dtype, size):
        b, n = (2, 6) if size == 0 else (3, 4)  # no size equal to the column count (duck sizing)
        b1, b2 = random_pairs(b, n, three_d=three_d, dtype=dtype, seed=21 + size, device=device)
        return Sample((b1, b2))

    return sample


def _empty(three_d):
    d = 7 if three_d else 5

    def empty(device, dtype):
        z = torch.zeros
        return [
            Sample(
                (z(0, 3, d, dtype=dtype, device=device), z(0, 3, d, dtype=dtype, device=device)), out_shapes=[(0, 3)]
            ),
            Sample(
                (z(2, 0, d, dtype=dtype, device=device), z(2, 0, d, dtype=dtype, device=device)), out_shapes=[(2, 0)]
            ),
        ]

    return empty


def _cuda_samples(three_d):
    def samples(dtype):
        for b, n, spread, seed in ((1, 1, 1.0, 0), (2, 333, 0.5, 1), (4, 1000, 4.0, 2), (1, 5000, 0.2, 3)):
            yield Sample(random_pairs(b, n, three_d=three_d, dtype=dtype, seed=seed, spread=spread))

    return samples


def _cuda_tol(dtype, what, expected, sample):
    # Both devices compute in float (double for float64) and differ by FMA
    # contraction and sin/cos ulps: float-level absolute differences of the
    # gradients' cancelling corner sums (float32 vs float64 on these samples:
    # < 6e-6), so 10x the CPU tolerance for float32 / float64.
    if dtype not in (torch.float16, torch.bfloat16):
        return {k: v * 10 for k, v in TOL[dtype].items()}
    # 16-bit: the float results are rounded once to the dtype, so they differ
    # by at most one ulp (eps relative; 2x margin) plus the float-level part.
    return dict(rtol=2 * torch.finfo(dtype).eps, atol=1e-4)


def _helpers(three_d):
    def helpers(sample):
        b1, b2 = sample.args
        g = torch.Generator().manual_seed(5)
        go = torch.randn(b1.shape[:2], generator=g, dtype=torch.float64).to(b1.device, b1.dtype)
        backward = (
            torch.ops.mmops._diff_iou_rotated_3d_backward if three_d else torch.ops.mmops._diff_iou_rotated_2d_backward
        )
        return [(backward, (go, b1, b2))]

    return helpers


class _IoULoss2d(torch.nn.Module):
    """An IoU loss of rotated boxes: the wrapper, the module and the op."""

    def __init__(self):
        super().__init__()
        self.iou = mmops.DiffIoURotated2d()

    def forward(self, b1: torch.Tensor, b2: torch.Tensor):
        loss = (1 - self.iou(b1 * 1.0, b2)).sum() + mmops.diff_iou_rotated_2d(b2, b1).pow(2).sum()
        return loss, op2(b1, b1)


class _IoULoss3d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.iou = mmops.DiffIoURotated3d()

    def forward(self, b1: torch.Tensor, b2: torch.Tensor):
        return (1 - self.iou(b1 * 1.0, b2)).sum(), mmops.diff_iou_rotated_3d(b2, b1) + op3(b1, b2)


def _bad_inputs(three_d):
    d = 7 if three_d else 5
    first, second = ("box3d1", "box3d2") if three_d else ("box1", "box2")
    z = torch.zeros
    return {
        "columns": BadInput(
            lambda *_: (z(2, 3, d - 1), z(2, 3, d)), rf"{first} to be a 3-D tensor of shape \[B, N, {d}\]", meta=True
        ),
        "rank": BadInput(lambda *_: (z(2, 3, d), z(3, d)), rf"{second} to be a 3-D tensor of shape \[B, N, {d}\]"),
        "int": BadInput(
            lambda *_: (z(2, 3, d, dtype=torch.int32), z(2, 3, d, dtype=torch.int32)),
            "floating point dtype, but got Int",
        ),
        "dtypes_differ": BadInput(
            lambda *_: (z(2, 3, d), z(2, 3, d, dtype=torch.float64)),
            rf"{second} to have the dtype of {first} \(Float\), but got Double",
        ),
        "shapes_differ": BadInput(
            lambda *_: (z(2, 3, d), z(2, 4, d)), rf"{second} of the shape of {first} \(aligned pairs\)", meta=True
        ),
        "device": BadInput(lambda *_: (z(2, 3, d, device="cuda"), z(2, 3, d)), f"{second} on the device of", cuda=True),
    }


def _case(name, three_d, **more):
    return ConformanceCase(
        name,
        op3 if three_d else op2,
        _sample(three_d),
        dtype=torch.float64,
        dtypes=DTYPES,
        grad_args=(0, 1),
        empty=_empty(three_d),
        helpers=_helpers(three_d),
        cuda_samples=_cuda_samples(three_d),
        cuda_tol=_cuda_tol,
        bad_inputs=_bad_inputs(three_d),
        compile_tol=dict(rtol=1e-7, atol=1e-7),
        **more,
    )


CONFORMANCE = [
    _case("diff_iou_rotated_2d", False, module=_IoULoss2d),
    _case("diff_iou_rotated_3d", True, module=_IoULoss3d),
]


class TestDiffIouRotatedConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- known vectors


def test_mmcv_vectors_2d():
    # mmcv's tests/test_ops/test_diff_iou_rotated.py
    b1 = torch.tensor([[[0.5, 0.5, 1.0, 1.0, 0.0]] * 5])
    b2 = torch.tensor(
        [
            [
                [0.5, 0.5, 1.0, 1.0, 0.0],
                [0.5, 0.5, 1.0, 1.0, math.pi / 2],
                [0.5, 0.5, 1.0, 1.0, math.pi / 4],
                [1.0, 1.0, 1.0, 1.0, 0.0],
                [1.5, 1.5, 1.0, 1.0, 0.0],
            ]
        ]
    )
    expected = torch.tensor([[1.0, 1.0, 0.7071, 1 / 7, 0.0]])
    torch.testing.assert_close(mmops.diff_iou_rotated_2d(b1, b2), expected, rtol=0, atol=1e-4)


def test_mmcv_vectors_3d():
    b1 = torch.tensor([[[0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 0.0]] * 5])
    b2 = torch.tensor(
        [
            [
                [0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 0.0],
                [0.5, 0.5, 0.5, 1.0, 1.0, 2.0, math.pi / 2],
                [0.5, 0.5, 0.5, 1.0, 1.0, 1.0, math.pi / 4],
                [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
                [-1.5, -1.5, -1.5, 2.5, 2.5, 2.5, 0.0],
            ]
        ]
    )
    expected = torch.tensor([[1.0, 0.5, 0.7071, 1 / 15, 0.0]])
    torch.testing.assert_close(mmops.diff_iou_rotated_3d(b1, b2), expected, rtol=0, atol=1e-4)


# ----------------------------------------------------------------------------- exact reference


@pytest.mark.parametrize("spread", [0.3, 2.0, 6.0])
def test_forward_matches_exact_2d(spread):
    b1, b2 = random_pairs(3, 40, seed=int(spread * 10), spread=spread)
    out = mmops.diff_iou_rotated_2d(b1, b2)
    ref = torch.tensor([[exact_iou_2d(b1[i, j], b2[i, j]) for j in range(40)] for i in range(3)], dtype=out.dtype)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    assert (ref > 0).sum() > 10


@pytest.mark.parametrize("spread", [0.3, 2.0])
def test_forward_matches_exact_3d(spread):
    b1, b2 = random_pairs(2, 40, three_d=True, seed=5 + int(spread * 10), spread=spread)
    out = mmops.diff_iou_rotated_3d(b1, b2)
    ref = torch.tensor([[exact_iou_3d(b1[i, j], b2[i, j]) for j in range(40)] for i in range(2)], dtype=out.dtype)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    assert (ref > 0).sum() > 10


def test_forward_matches_composite_float32():
    b1, b2 = random_pairs(4, 300, dtype=torch.float32, seed=9, spread=2.0)
    torch.testing.assert_close(mmops.diff_iou_rotated_2d(b1, b2), composite_iou_2d(b1, b2), rtol=0, atol=2e-5)
    c1, c2 = random_pairs(4, 300, three_d=True, dtype=torch.float32, seed=10, spread=2.0)
    torch.testing.assert_close(mmops.diff_iou_rotated_3d(c1, c2), composite_iou_3d(c1, c2), rtol=0, atol=2e-5)


# ----------------------------------------------------------------------------- gradients


def _generic_pairs(three_d, seed):
    """A mix of partial overlaps, containments and misses at random angles."""
    b1, b2 = random_pairs(1, 12, three_d=three_d, seed=seed, spread=2.5)
    size = slice(3, 6) if three_d else slice(2, 4)
    centre = slice(0, 3) if three_d else slice(0, 2)
    b2[0, :3, size] = b1[0, :3, size] * 0.3  # small box2 ...
    b2[0, :3, centre] = b1[0, :3, centre] + 0.05  # ... inside box1
    return b1.requires_grad_(True), b2.requires_grad_(True)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("three_d", [False, True])
def test_gradcheck(seed, three_d):
    b1, b2 = _generic_pairs(three_d, seed)
    fn = mmops.diff_iou_rotated_3d if three_d else mmops.diff_iou_rotated_2d
    assert torch.autograd.gradcheck(fn, (b1, b2), eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("three_d", [False, True])
def test_gradient_matches_composite_autograd(three_d):
    b1, b2 = random_pairs(3, 200, three_d=three_d, seed=31, spread=2.0)
    b1.requires_grad_(True)
    b2.requires_grad_(True)
    fn, comp = (
        (mmops.diff_iou_rotated_3d, composite_iou_3d) if three_d else (mmops.diff_iou_rotated_2d, composite_iou_2d)
    )
    weight = torch.rand(3, 200, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    got = torch.autograd.grad((fn(b1, b2) * weight).sum(), (b1, b2))
    ref = torch.autograd.grad((comp(b1, b2) * weight).sum(), (b1, b2))
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("three_d", [False, True])
def test_gradient_matches_exact_finite_differences(three_d):
    b1, b2 = random_pairs(1, 6, three_d=three_d, seed=41, spread=1.5)
    exact = exact_iou_3d if three_d else exact_iou_2d
    fn = mmops.diff_iou_rotated_3d if three_d else mmops.diff_iou_rotated_2d
    g1, g2 = torch.autograd.grad(fn(b1.requires_grad_(True), b2.requires_grad_(True)).sum(), (b1, b2))
    h = 1e-6
    for box, grad, other, first in ((b1, g1, b2, True), (b2, g2, b1, False)):
        for j in range(6):
            for k in range(box.shape[-1]):
                plus, minus = box[0, j].detach().clone(), box[0, j].detach().clone()
                plus[k] += h
                minus[k] -= h
                o = other[0, j].detach()
                fd = ((exact(plus, o) - exact(minus, o)) if first else (exact(o, plus) - exact(o, minus))) / (2 * h)
                assert abs(grad[0, j, k].item() - fd) < 1e-6, (j, k, grad[0, j, k].item(), fd)


def test_double_backward_raises():
    b1, b2 = random_pairs(1, 3, seed=2)
    b1.requires_grad_(True)
    out = mmops.diff_iou_rotated_2d(b1, b2)
    go = torch.ones_like(out).requires_grad_(True)
    with pytest.raises(RuntimeError, match="double backward is not implemented"):
        torch.autograd.grad(out, b1, go, create_graph=True)


# ----------------------------------------------------------------------------- edge cases


def _grads(fn, b1, b2):
    b1, b2 = b1.clone().requires_grad_(True), b2.clone().requires_grad_(True)
    out = fn(b1, b2)
    g1, g2 = torch.autograd.grad(out.sum(), (b1, b2))
    return out.detach(), g1, g2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_identical_boxes(dtype):
    # IoU exactly 1; the gradient of the polygon the clip keeps (box1's corners),
    # as mmcv's composite: d/dw1 = 1/w, d/dw2 = -1/w, the rest 0
    b = torch.tensor([[[3.0, -2.0, 4.0, 2.0, 0.7], [1e3, 1e3, 1.0, 3.0, -math.pi / 2]]], dtype=dtype)
    out, g1, g2 = _grads(mmops.diff_iou_rotated_2d, b, b)
    assert (out == 1).all()
    w, h = b[..., 2], b[..., 3]
    zero = torch.zeros_like(w)
    torch.testing.assert_close(g1, torch.stack([zero, zero, 1 / w, 1 / h, zero], -1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g2, torch.stack([zero, zero, -1 / w, -1 / h, zero], -1), rtol=1e-5, atol=1e-5)


def test_identical_boxes_3d():
    b = torch.tensor([[[3.0, -2.0, 1.0, 4.0, 2.0, 5.0, 0.7]]], dtype=torch.float64)
    out, g1, g2 = _grads(mmops.diff_iou_rotated_3d, b, b)
    assert (out == 1).all()
    assert torch.isfinite(g1).all() and torch.isfinite(g2).all()
    # the z extents tie: min / max split their gradient evenly, so l and z get
    # 0 (between the one-sided derivatives -1/l and +1/l)
    for g in (g1, g2):
        torch.testing.assert_close(g[..., [2, 5]], torch.zeros(1, 1, 2, dtype=torch.float64), atol=1e-12, rtol=0)


def test_degenerate_and_nonfinite_boxes():
    good = [1.0, 1.0, 2.0, 2.0, 0.3]
    rows = [
        [1.0, 1.0, 0.0, 2.0, 0.3],  # w = 0
        [1.0, 1.0, 2.0, -1.0, 0.3],  # h < 0
        [float("nan"), 1.0, 2.0, 2.0, 0.3],
        [1.0, 1.0, float("inf"), 2.0, 0.3],
        [1.0, 1.0, 2.0, 2.0, float("nan")],
    ]
    b1 = torch.tensor([rows], dtype=torch.float64)
    b2 = torch.tensor([[good] * len(rows)], dtype=torch.float64)
    for x, y in ((b1, b2), (b2, b1)):
        out, g1, g2 = _grads(mmops.diff_iou_rotated_2d, x, y)
        assert (out == 0).all()
        assert (g1 == 0).all() and (g2 == 0).all()


def test_degenerate_3d():
    good = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 0.3]
    rows = [[1.0, 1.0, 1.0, 2.0, 2.0, 0.0, 0.3], [1.0, 1.0, float("nan"), 2.0, 2.0, 2.0, 0.3]]
    b1 = torch.tensor([rows], dtype=torch.float64)
    b2 = torch.tensor([[good] * 2], dtype=torch.float64)
    out, g1, g2 = _grads(mmops.diff_iou_rotated_3d, b1, b2)
    assert (out == 0).all() and (g1 == 0).all() and (g2 == 0).all()


def test_separated_and_touching_boxes():
    b1 = torch.tensor(
        [[[0.0, 0.0, 2.0, 2.0, 0.0], [0.0, 0.0, 2.0, 2.0, 0.0], [0.0, 0.0, 2.0, 2.0, 0.0]]], dtype=torch.float64
    )
    b2 = torch.tensor(
        [[[5.0, 0.0, 2.0, 2.0, 0.4], [2.0, 0.0, 2.0, 2.0, 0.0], [2.0, 2.0, 2.0, 2.0, 0.0]]], dtype=torch.float64
    )
    out, g1, g2 = _grads(mmops.diff_iou_rotated_2d, b1, b2)
    assert (out == 0).all()
    assert torch.isfinite(g1).all() and torch.isfinite(g2).all()


@pytest.mark.parametrize("angle", [math.pi / 2, -math.pi / 2, math.pi, 3 * math.pi])
def test_right_angles(angle):
    b1 = torch.tensor([[[0.0, 0.0, 4.0, 1.0, 0.0], [0.3, 0.2, 4.0, 1.0, 0.1]]], dtype=torch.float64)
    b2 = torch.tensor([[[0.0, 0.0, 4.0, 1.0, angle], [0.0, 0.0, 3.0, 2.0, angle]]], dtype=torch.float64)
    out, g1, g2 = _grads(mmops.diff_iou_rotated_2d, b1, b2)
    ref = [exact_iou_2d(b1[0, j], b2[0, j]) for j in range(2)]
    torch.testing.assert_close(out[0], torch.tensor(ref, dtype=torch.float64), rtol=1e-12, atol=1e-12)
    assert torch.isfinite(g1).all() and torch.isfinite(g2).all()


def test_corner_on_edge_is_finite():
    # box2's corner exactly on box1's edge, and collinear edges
    b1 = torch.tensor([[[0.0, 0.0, 2.0, 2.0, 0.0], [0.0, 0.0, 2.0, 2.0, 0.0]]], dtype=torch.float64)
    b2 = torch.tensor(
        [[[1.0 + math.sqrt(0.5), 0.0, 1.0, 1.0, math.pi / 4], [1.0, 0.5, 2.0, 1.0, 0.0]]], dtype=torch.float64
    )
    out, g1, g2 = _grads(mmops.diff_iou_rotated_2d, b1, b2)
    ref = [exact_iou_2d(b1[0, j], b2[0, j]) for j in range(2)]
    torch.testing.assert_close(out[0], torch.tensor(ref, dtype=torch.float64), rtol=1e-12, atol=1e-12)
    assert torch.isfinite(g1).all() and torch.isfinite(g2).all()


def test_far_from_origin():
    b1, b2 = random_pairs(1, 50, dtype=torch.float32, seed=3, spread=1.0)
    far1, far2 = b1.clone(), b2.clone()
    far1[..., :2] += 1e4
    far2[..., :2] += 1e4
    exact = torch.tensor(
        [[exact_iou_2d(far1[0, j].double(), far2[0, j].double()) for j in range(50)]], dtype=torch.float64
    )
    torch.testing.assert_close(mmops.diff_iou_rotated_2d(far1, far2).double(), exact, rtol=0, atol=1e-4)


def test_strided_inputs():
    b1, b2 = random_pairs(3, 8, seed=4)
    wide1 = torch.cat([b1, b1], dim=-1)[..., :5]
    t2 = b2.transpose(0, 1).contiguous().transpose(0, 1)
    assert not wide1.is_contiguous() and not t2.is_contiguous()
    torch.testing.assert_close(mmops.diff_iou_rotated_2d(wide1, t2), mmops.diff_iou_rotated_2d(b1, b2), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_computes_in_float(dtype):
    b1, b2 = random_pairs(2, 50, dtype=dtype, seed=6, spread=1.0)
    out = mmops.diff_iou_rotated_2d(b1, b2)
    assert out.dtype == dtype
    ref = mmops.diff_iou_rotated_2d(b1.float(), b2.float()).to(dtype)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_autocast_runs_in_float32():
    b1, b2 = random_pairs(1, 10, dtype=torch.float32, seed=7)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = mmops.diff_iou_rotated_2d(b1.bfloat16(), b2)
    assert out.dtype == torch.float32


# ----------------------------------------------------------------------------- the mmcv.ops bridge


def test_mmcv_bridge_routes_functions():
    import mmops.mmcv_ops  # noqa: F401

    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    from mmcv.ops import diff_iou_rotated as mmcv_module

    b1, b2 = random_pairs(2, 30, dtype=torch.float32, seed=8)
    c1, c2 = random_pairs(2, 30, three_d=True, dtype=torch.float32, seed=9)
    for f in (ops.diff_iou_rotated_2d, mmcv_module.diff_iou_rotated_2d):
        torch.testing.assert_close(f(b1, b2), mmops.diff_iou_rotated_2d(b1, b2), rtol=0, atol=0)
    for f in (ops.diff_iou_rotated_3d, mmcv_module.diff_iou_rotated_3d):
        torch.testing.assert_close(f(c1, c2), mmops.diff_iou_rotated_3d(c1, c2), rtol=0, atol=0)
    x = b1.clone().requires_grad_(True)
    (1 - ops.diff_iou_rotated_2d(x, b2)).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize("spread", [0.2, 4.0])
def test_cuda_matches_cpu_large(three_d, spread):
    b1, b2 = random_pairs(8, 20000, three_d=three_d, dtype=torch.float32, seed=12, spread=spread)
    fn = mmops.diff_iou_rotated_3d if three_d else mmops.diff_iou_rotated_2d
    out, g1, g2 = _grads(fn, b1, b2)
    out_c, g1_c, g2_c = _grads(fn, b1.cuda(), b2.cuda())
    torch.testing.assert_close(out_c.cpu(), out, rtol=1e-4, atol=1e-5)
    # rare pairs within an ulp of a combinatorial change may differ more
    for g, gc in ((g1, g1_c), (g2, g2_c)):
        close = torch.isclose(gc.cpu(), g, rtol=1e-3, atol=1e-4).all(-1)
        assert close.float().mean() > 0.9999


@pytest.mark.cuda
def test_cuda_edge_cases():
    rows1 = [[1.0, 1.0, 0.0, 2.0, 0.3], [float("nan"), 1.0, 2.0, 2.0, 0.3], [0.5, 0.5, 1.0, 1.0, 0.0]]
    rows2 = [[1.0, 1.0, 2.0, 2.0, 0.3], [1.0, 1.0, 2.0, 2.0, 0.3], [0.5, 0.5, 1.0, 1.0, math.pi / 4]]
    b1 = torch.tensor([rows1], device="cuda")
    b2 = torch.tensor([rows2], device="cuda")
    out, g1, g2 = _grads(mmops.diff_iou_rotated_2d, b1, b2)
    assert out[0, 0] == 0 and out[0, 1] == 0
    assert abs(out[0, 2].item() - 0.7071) < 1e-4
    assert (g1[0, :2] == 0).all() and torch.isfinite(g1).all() and torch.isfinite(g2).all()


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_identical_boxes(dtype):
    # exactly 1 also on the GPU: polygon.h's cross rounds each product (no FMA),
    # so every corner tests exactly on the other box's edge
    b = torch.tensor([[[3.0, -2.0, 4.0, 2.0, 0.7], [1e3, 1e3, 1.0, 3.0, -math.pi / 2]]], dtype=dtype)
    c = torch.tensor([[[3.0, -2.0, 1.0, 4.0, 2.0, 5.0, 0.7]]], dtype=dtype)
    for fn, x in ((mmops.diff_iou_rotated_2d, b), (mmops.diff_iou_rotated_3d, c)):
        out, g1, g2 = _grads(fn, x.cuda(), x.cuda())
        assert (out == 1).all()
        _, r1, r2 = _grads(fn, x, x)
        torch.testing.assert_close(g1.cpu(), r1, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g2.cpu(), r2, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
def test_cuda_empty_and_noncontiguous():
    e = torch.zeros(0, 4, 7, device="cuda", requires_grad=True)
    out = mmops.diff_iou_rotated_3d(e, e)
    assert out.shape == (0, 4)
    out.sum().backward()
    b1, b2 = random_pairs(2, 100, dtype=torch.float32, seed=13, device="cuda")
    wide = torch.cat([b1, b1], dim=-1)[..., :5]
    torch.testing.assert_close(mmops.diff_iou_rotated_2d(wide, b2), mmops.diff_iou_rotated_2d(b1, b2))
