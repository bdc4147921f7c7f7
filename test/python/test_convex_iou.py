"""mmops.convex_iou and mmops.convex_giou: the conformance cases, mmcv's published vectors,
an exact reference (test/python/polygon_reference.py: a brute-force hull in Fractions),
gradcheck of convex_giou, degenerate sets (duplicates, collinear), points on polygon edges,
clockwise polygons, huge and non-finite coordinates, the mmcv.ops bridge and the
CUDA-specific tests (skipped without a GPU)."""

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from polygon_reference import convex_hull, pointset_giou, pointset_iou, quad_points, signed_area

import mmops

iou_op = torch.ops.mmops.convex_iou
giou_op = torch.ops.mmops.convex_giou
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


# ----------------------------------------------------------------------------- inputs


def random_pointsets(n, *, dtype=torch.float64, seed=0, image=60.0, spread=12.0, device="cpu"):
    """9 points per set scattered around a centre (Oriented RepPoints-like)."""
    g = torch.Generator().manual_seed(seed)
    centre = torch.rand(n, 1, 2, generator=g, dtype=torch.float64) * image
    pts = centre + (torch.rand(n, 9, 2, generator=g, dtype=torch.float64) - 0.5) * spread
    return pts.reshape(n, 18).to(dtype=dtype, device=device)


def random_quads(m, *, dtype=torch.float64, seed=0, image=60.0, side=14.0, device="cpu"):
    """Rotated rectangles (convex), every other one clockwise."""
    g = torch.Generator().manual_seed(seed)
    c = torch.rand(m, 2, generator=g, dtype=torch.float64) * image
    wh = torch.rand(m, 2, generator=g, dtype=torch.float64) * side + 2
    t = torch.rand(m, generator=g, dtype=torch.float64) * 3.1
    u = torch.stack([t.cos(), t.sin()], 1) * wh[:, :1] / 2
    v = torch.stack([-t.sin(), t.cos()], 1) * wh[:, 1:] / 2
    q = torch.stack([c - u - v, c + u - v, c + u + v, c - u + v], 1)
    q[1::2] = q[1::2].flip(1)
    return q.reshape(m, 8).to(dtype=dtype, device=device)


def near_pairs(n, *, dtype=torch.float64, seed=0, device="cpu"):
    """pointsets and polygons that overlap row by row (convex_giou's aligned pairs)."""
    sets = random_pointsets(n, seed=seed)
    centre = sets.reshape(n, 9, 2).mean(1)
    quads = random_quads(n, seed=seed + 100, image=0.0) + (centre + torch.randn(n, 2, dtype=torch.float64)).repeat(1, 4)
    return sets.to(dtype=dtype, device=device), quads.to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------- conformance


def _iou_sample(device, dtype, size):
    n, k = (11, 6) if size == 0 else (7, 9)
    sets = random_pointsets(n, dtype=dtype, seed=size, device=device)
    return Sample((sets, random_quads(k, dtype=dtype, seed=20 + size, device=device)))


def _giou_sample(device, dtype, size):
    return Sample(near_pairs(9 if size == 0 else 5, dtype=dtype, seed=size, device=device))


def _iou_empty(device, dtype):
    e18, e8 = torch.zeros(0, 18, dtype=dtype, device=device), torch.zeros(0, 8, dtype=dtype, device=device)
    sets, quads = random_pointsets(3, dtype=dtype, device=device), random_quads(4, dtype=dtype, device=device)
    return [Sample((e18, quads), out_shapes=[(0, 4)]), Sample((sets, e8), out_shapes=[(3, 0)])]


def _giou_empty(device, dtype):
    e18, e8 = torch.zeros(0, 18, dtype=dtype, device=device), torch.zeros(0, 8, dtype=dtype, device=device)
    return [Sample((e18, e8), out_shapes=[(0,), (0, 18)])]


def _iou_cuda_samples(dtype):
    for n, k in ((1, 1), (40, 33), (700, 100)):
        yield Sample((random_pointsets(n, dtype=dtype, seed=n), random_quads(k, dtype=dtype, seed=k)))


def _giou_cuda_samples(dtype):
    for n in (1, 300, 3000):
        yield Sample(near_pairs(n, dtype=dtype, seed=n))


def _tol(dtype, what, expected, sample):
    return {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-9, atol=1e-10)}.get(
        dtype, dict(rtol=5e-2, atol=5e-2)
    )


class _ConvexNet(torch.nn.Module):
    """Oriented RepPoints' use: IoU for assignment, the convex GIoU loss for regression."""

    def __init__(self):
        super().__init__()
        self.loss = mmops.ConvexGIoULoss(reduction="sum", loss_weight=0.5)

    def forward(self, pointsets: torch.Tensor, polygons: torch.Tensor):
        # Assignment needs no gradient. no_grad, not .detach(): with .detach() the
        # compiled CUDA graphs of torch 2.11 still reached convex_iou's
        # not-implemented backward (not seen with torch 2.14); under no_grad the op
        # never attaches that node, whatever its input's requires_grad looks like.
        with torch.no_grad():
            ious = mmops.convex_iou(pointsets, polygons)
        giou, grad = giou_op(pointsets * 1.0, polygons)
        return ious, giou, self.loss(pointsets, polygons)


_Z = torch.zeros


def _bad(op_rows):
    return {
        "pointsets_16_cols": BadInput(
            lambda *_: (_Z(3, 16), _Z(3, 8)), r"pointsets to be a 2-D tensor of shape \[N, 18\]"
        ),
        "polygons_10_cols": BadInput(
            lambda *_: (_Z(3, 18), _Z(3, 10)), rf"polygons to be a 2-D tensor of shape \[{op_rows}, 8\]"
        ),
        "int": BadInput(
            lambda *_: (_Z(3, 18, dtype=torch.int32), _Z(3, 8, dtype=torch.int32)), "floating point dtype, but got Int"
        ),
        "dtypes_differ": BadInput(
            lambda *_: (_Z(3, 18), _Z(3, 8, dtype=torch.float64)),
            r"polygons to have the dtype of pointsets \(Float\), but got Double",
        ),
        "polygons_on_cpu": BadInput(
            lambda *_: (_Z(3, 18, device="cuda"), _Z(3, 8)), "polygons on the device of pointsets", cuda=True
        ),
    }


CONFORMANCE = [
    ConformanceCase(
        "convex_iou",
        iou_op,
        _iou_sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        empty=_iou_empty,
        cuda_samples=_iou_cuda_samples,
        cuda_tol=_tol,
        bad_inputs=_bad("K"),
    ),
    ConformanceCase(
        "convex_giou",
        giou_op,
        _giou_sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        grad_args=(0,),
        empty=_giou_empty,
        module=_ConvexNet,
        cuda_samples=_giou_cuda_samples,
        cuda_tol=_tol,
        compile_tol=dict(rtol=1e-9, atol=1e-9),
        bad_inputs={
            **_bad("N"),
            "rows_differ": BadInput(
                lambda *_: (_Z(3, 18), _Z(2, 8)), "expected as many polygons as pointsets .* but got 2 and 3"
            ),
        },
    ),
]


class TestConvexIoUConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- known vectors

MMCV_POINTSETS = [
    [1.0, 1.0, 2.0, 2.0, 1.0, 2.0, 2.0, 1.0, 1.0, 3.0, 3.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.5, 1.5],
    [1.5, 1.5, 2.5, 2.5, 1.5, 2.5, 2.5, 1.5, 1.5, 3.5, 3.5, 1.5, 2.5, 3.5, 3.5, 2.5, 2.0, 2.0],
]
MMCV_POLYGONS = [[1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 1.0], [1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 1.0]]
MMCV_IOU = [[0.2857, 0.8750], [0.0588, 0.4286]]
MMCV_GIOU = [0.2857, 0.3831]
MMCV_GRAD = [
    [0.0204, 0.0408, 0, 0, 0, 0, 0, 0, 0.0612, -0.0408, -0.0408, 0.0816, -0.0408, -0.0816, -0.0816, -0.0408, 0, 0],
    [-0.1848, -0.1848, 0, 0, 0, 0, 0, 0, -0.1076, -0.0801, -0.0801, -0.1076, -0.0367, -0.0734, -0.0734, -0.0367, 0, 0],
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mmcv_vectors(dtype):
    # mmcv tests/test_ops/test_convex_iou.py (atol 1e-3 there)
    sets, polys = torch.tensor(MMCV_POINTSETS, dtype=dtype), torch.tensor(MMCV_POLYGONS, dtype=dtype)
    tol = dict(rtol=0, atol=1e-3)
    torch.testing.assert_close(mmops.convex_iou(sets, polys).double(), torch.tensor(MMCV_IOU).double(), **tol)
    giou, grad = mmops.convex_giou(sets, polys)
    torch.testing.assert_close(giou.double(), torch.tensor(MMCV_GIOU).double(), **tol)
    torch.testing.assert_close(grad[1].double(), torch.tensor(MMCV_GRAD[1]).double(), **tol)
    # Row 0 is degenerate: the unit square shares two hull edges. mmops gives the
    # derivative for moving those edges inwards (dI/d(1,1) = (-3/4, -3/4)); mmcv's chain
    # rule through its clipping differs in two entries (0.0408 and 0.0816).
    expected = torch.tensor(MMCV_GRAD[0]).double()
    expected[1], expected[11] = 1 / 49, 3 / 49
    torch.testing.assert_close(grad[0].double(), expected, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_iou_random_against_exact(dtype):
    sets = random_pointsets(30, dtype=dtype, seed=1)
    quads = random_quads(12, dtype=dtype, seed=2)
    out = iou_op(sets, quads)
    assert out.shape == (30, 12) and out.dtype == dtype
    expected = torch.tensor([[pointset_iou(s, q) for q in quads.tolist()] for s in sets.tolist()], dtype=torch.float64)
    assert (expected > 0).sum() > 20
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    torch.testing.assert_close(out.double(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_giou_random_against_exact(dtype):
    sets, quads = near_pairs(60, dtype=dtype, seed=3)
    giou, grad = giou_op(sets, quads)
    assert giou.shape == (60,) and grad.shape == (60, 18) and giou.dtype == grad.dtype == dtype
    expected = torch.tensor([pointset_giou(s, q) for s, q in zip(sets.tolist(), quads.tolist())], dtype=torch.float64)
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    torch.testing.assert_close(giou.double(), expected, rtol=tol, atol=tol)
    # the IoU part agrees with convex_iou
    iou = iou_op(sets, quads).diagonal()
    assert (giou <= iou + 1e-6).all()


def test_giou_gradcheck():
    sets, quads = near_pairs(12, seed=4)
    sets.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p: giou_op(p, quads)[0], (sets,))
    # the gradient output is what backward uses
    giou, grad = giou_op(sets, quads)
    (auto,) = torch.autograd.grad(giou.sum(), sets)
    assert torch.equal(auto, grad)
    assert not grad.requires_grad


def test_giou_gradient_separated_and_contained():
    """Disjoint pairs (IoU 0: only the enclosing-hull term moves) and a hull inside its
    polygon (I = A): gradcheck holds in both regimes."""
    sets = random_pointsets(6, seed=5, image=0.0, spread=4.0)
    far = random_quads(6, seed=6, image=0.0, side=3.0) + 20.0
    big = random_quads(6, seed=7, image=0.0, side=2.0) * 6.0
    for quads in (far, big):
        p = sets.clone().requires_grad_(True)
        assert torch.autograd.gradcheck(lambda x: giou_op(x, quads)[0], (p,))


def test_double_backward_raises_and_polygons_not_differentiable():
    sets, quads = near_pairs(3, seed=8)
    sets.requires_grad_(True)
    giou, _ = giou_op(sets, quads)
    go = torch.ones_like(giou).requires_grad_(True)
    with pytest.raises(RuntimeError, match="double backward is not implemented"):
        torch.autograd.grad(giou, sets, go, create_graph=True)
    q = quads.clone().requires_grad_(True)
    with pytest.raises(RuntimeError, match="differentiable w.r.t. pointsets only"):
        giou_op(sets, q)[0].sum().backward()


def test_degenerate_sets():
    quad = torch.tensor([[0.0, 0.0, 4.0, 0.0, 4.0, 4.0, 0.0, 4.0]], dtype=torch.float64)
    same = torch.tensor([[1.0, 1.0] * 9], dtype=torch.float64)
    line = torch.tensor([[0.0, 0, 1, 1, 2, 2, 3, 3, 1, 1, 0, 0, 2, 2, 3, 3, 0.5, 0.5]], dtype=torch.float64)
    for sets in (same, line):
        assert iou_op(sets, quad).item() == 0.0
        giou, grad = giou_op(sets, quad)
        # no hull area: I = 0, U = B, giou = -(C - B) / C, no gradient
        c = float(abs(signed_area(convex_hull(quad_points(sets[0].tolist()) + quad_points(quad[0].tolist())))))
        assert giou.item() == pytest.approx(-(c - 16.0) / c, abs=1e-12)
        assert torch.equal(grad, torch.zeros_like(grad))
    # duplicates: the hull and IoU do not change; the gradient goes to the first copy
    sets, quads = near_pairs(1, seed=9)
    g0, d0 = giou_op(sets, quads)
    moving = d0.reshape(9, 2).abs().sum(1) > 0
    first = int(moving.nonzero()[0])
    slot = int((~moving).nonzero()[-1])  # an interior point, replaced by a copy of a hull vertex
    assert slot > first
    dup = sets.clone()
    dup[0, 2 * slot : 2 * slot + 2] = sets[0, 2 * first : 2 * first + 2]
    g1, d1 = giou_op(dup, quads)
    torch.testing.assert_close(g1, g0, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(d1, d0, rtol=1e-12, atol=1e-14)
    assert d1[0, 2 * slot : 2 * slot + 2].abs().sum() == 0


def test_points_on_edges_and_orientation():
    # a hull vertex exactly on a polygon edge, a polygon vertex on a hull edge
    sets = torch.tensor([[0.0, 0, 2, 0, 2, 2, 0, 2, 1, 1, 1, 0, 2, 1, 1, 2, 0, 1]], dtype=torch.float64)
    quads = torch.tensor(
        [[2.0, 1, 3, 0, 4, 1, 3, 2], [1.0, 0, 2, 1, 1, 2, 0, 1], [0.0, 0, 2, 0, 2, 2, 0, 2]], dtype=torch.float64
    )
    out = iou_op(sets, quads)
    expected = [pointset_iou(sets[0].tolist(), q) for q in quads.tolist()]
    assert out[0].tolist() == pytest.approx(expected, abs=1e-15)
    assert out[0, 2].item() == 1.0
    flipped = quads.reshape(3, 4, 2).flip(1).reshape(3, 8)
    assert torch.equal(iou_op(sets, flipped), out)
    for q in (quads, flipped):
        giou, _ = giou_op(sets.expand(3, 18).contiguous(), q)
        assert giou.tolist() == pytest.approx([pointset_giou(sets[0].tolist(), r) for r in q.tolist()], abs=1e-14)


def test_nonconvex_polygon_is_defined():
    """Undefined input: the result is the hull clipped by each edge's half-plane in
    turn (polygon.h), deterministic and in [0, 1]."""
    sets = random_pointsets(4, seed=10, image=0.0, spread=6.0)
    dart = torch.tensor([[-3.0, -3.0, 3.0, -3.0, 0.0, 0.0, 3.0, 3.0]], dtype=torch.float64).expand(4, 8)
    out = iou_op(sets, dart[:1])
    assert torch.isfinite(out).all() and (out >= 0).all() and (out <= 1).all()
    assert torch.equal(out, iou_op(sets, dart[:1]))
    giou, grad = giou_op(sets, dart.contiguous())
    assert torch.isfinite(giou).all() and torch.isfinite(grad).all()


def test_nonfinite_and_huge():
    sets, quads = near_pairs(4, seed=11)
    sets[1, 3] = float("nan")
    quads[2, 0] = float("inf")
    out = iou_op(sets, quads)
    assert torch.isfinite(out).all()
    assert (out[1] == 0).all() and (out[:, 2] == 0).all()
    giou, grad = giou_op(sets, quads)
    assert giou[1] == 0 and giou[2] == 0 and (grad[1:3] == 0).all()
    sets, quads = near_pairs(20, seed=12)
    shift = torch.tensor([1e6, -2e6], dtype=torch.float64)
    moved = (sets + shift.repeat(9), quads + shift.repeat(4))
    torch.testing.assert_close(iou_op(*moved), iou_op(sets, quads), rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(giou_op(*moved)[0], giou_op(sets, quads)[0], rtol=1e-8, atol=1e-8)
    moved32 = (sets + 1e4).float(), (quads + 1e4).float()
    torch.testing.assert_close(iou_op(*moved32).double(), iou_op(sets, quads), rtol=0, atol=5e-3)


def test_strided_inputs():
    sets = random_pointsets(8, seed=13)
    quads = random_quads(5, seed=14)
    wide = torch.zeros(8, 36, dtype=torch.float64)
    wide[:, 1::2] = sets
    assert torch.equal(iou_op(wide[:, 1::2], quads.t().contiguous().t()), iou_op(sets, quads))


def test_convex_giou_loss_module():
    sets, quads = near_pairs(10, seed=15)
    sets.requires_grad_(True)
    loss = mmops.ConvexGIoULoss(loss_weight=2.0)(sets, quads)
    giou, grad = giou_op(sets, quads)
    assert loss.item() == pytest.approx(2.0 * (1 - giou).mean().item())
    loss.backward()
    torch.testing.assert_close(sets.grad, -2.0 * grad / 10)
    torch.jit.script(mmops.ConvexGIoULoss())


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    convex_giou = mmcv_ops.convex_giou
    convex_iou = mmcv_ops.convex_iou

    sets, polys = torch.tensor(MMCV_POINTSETS), torch.tensor(MMCV_POLYGONS)
    torch.testing.assert_close(convex_iou(sets, polys), torch.tensor(MMCV_IOU), rtol=0, atol=1e-3)
    giou, grad = convex_giou(sets, polys)
    torch.testing.assert_close(giou, torch.tensor(MMCV_GIOU), rtol=0, atol=1e-3)
    torch.testing.assert_close(grad[1], torch.tensor(MMCV_GRAD[1]), rtol=0, atol=1e-3)
    sets, quads = near_pairs(16, dtype=torch.float32, seed=16)
    assert torch.equal(convex_iou(sets, quads), iou_op(sets, quads))
    g, d = convex_giou(sets, quads)
    e, f = giou_op(sets, quads)
    assert torch.equal(g, e) and torch.equal(d, f)


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_large_matches_cpu(dtype):
    sets = random_pointsets(4000, seed=17, image=800.0, spread=60.0).to(dtype)
    quads = random_quads(100, seed=18, image=800.0, side=80.0).to(dtype)
    tol = _tol(dtype, "", None, None)
    torch.testing.assert_close(iou_op(sets.cuda(), quads.cuda()).cpu(), iou_op(sets, quads), **tol)
    s, q = near_pairs(20000, seed=19)
    s, q = s.to(dtype), q.to(dtype)
    g, d = giou_op(s.cuda(), q.cuda())
    e, f = giou_op(s, q)
    torch.testing.assert_close(g.cpu(), e, **tol)
    torch.testing.assert_close(d.cpu(), f, **tol)


@pytest.mark.cuda
def test_cuda_known_vectors_and_nonfinite():
    sets, polys = torch.tensor(MMCV_POINTSETS).cuda(), torch.tensor(MMCV_POLYGONS).cuda()
    torch.testing.assert_close(iou_op(sets, polys).cpu(), torch.tensor(MMCV_IOU), rtol=0, atol=1e-3)
    giou, grad = giou_op(sets, polys)
    torch.testing.assert_close(giou.cpu(), torch.tensor(MMCV_GIOU), rtol=0, atol=1e-3)
    torch.testing.assert_close(grad[1].cpu(), torch.tensor(MMCV_GRAD[1]), rtol=0, atol=1e-3)
    s, q = near_pairs(4, seed=20)
    s[1, 3] = float("nan")
    q[2, 0] = float("inf")
    # Not torch.equal: nvcc fuses the clip's and the shoelace's products into FMAs
    # (the CPU build does not), so finite values differ by a few ulps: the float64
    # tolerance of the conformance CUDA == CPU tests.
    exact = dict(**_tol(torch.float64, "", None, None), equal_nan=True)
    iou_gpu, iou_cpu = iou_op(s.cuda(), q.cuda()).cpu(), iou_op(s, q)
    torch.testing.assert_close(iou_gpu, iou_cpu, **exact)
    for bad in (iou_gpu[1], iou_gpu[:, 2]):  # the non-finite set's row, polygon's column
        assert torch.equal(bad, torch.zeros_like(bad))
    (giou_gpu, grad_gpu), (giou_cpu, grad_cpu) = [t.cpu() for t in giou_op(s.cuda(), q.cuda())], giou_op(s, q)
    torch.testing.assert_close(giou_gpu, giou_cpu, **exact)
    torch.testing.assert_close(grad_gpu, grad_cpu, **exact)
    assert torch.equal(giou_gpu[1:3], torch.zeros(2, dtype=giou_gpu.dtype))
    assert torch.equal(grad_gpu[1:3], grad_cpu[1:3])  # the non-finite rows: the CPU's fill
