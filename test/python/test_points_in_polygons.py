"""mmops.points_in_polygons: the conformance cases, mmcv's published vectors, an exact
(Fraction) reference away from the boundary, mmcv's boundary rule on a square, non-finite
coordinates, the mmcv.ops bridge and the CUDA-specific test (skipped without a GPU)."""

from fractions import Fraction

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample

import mmops

op = torch.ops.mmops.points_in_polygons
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def random_quads(m, *, dtype=torch.float64, seed=0, image=100.0, device="cpu"):
    """Convex quadrilaterals: rotated rectangles, half of them clockwise."""
    g = torch.Generator().manual_seed(seed)
    c = torch.rand(m, 2, generator=g, dtype=torch.float64) * image
    wh = torch.rand(m, 2, generator=g, dtype=torch.float64) * image / 3 + 2
    t = torch.rand(m, generator=g, dtype=torch.float64) * 3.1
    u = torch.stack([t.cos(), t.sin()], 1) * wh[:, :1] / 2
    v = torch.stack([-t.sin(), t.cos()], 1) * wh[:, 1:] / 2
    q = torch.stack([c - u - v, c + u - v, c + u + v, c - u + v], 1)
    q[::2] = q[::2].flip(1)
    return q.reshape(m, 8).to(dtype=dtype, device=device)


def random_points(n, *, dtype=torch.float64, seed=0, image=100.0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, 2, generator=g, dtype=torch.float64) * image).to(dtype=dtype, device=device)


def exact_side(point, quad):
    """+1 strictly inside the convex quadrilateral, -1 strictly outside, 0 on its boundary."""
    px, py = (Fraction(float(v)) for v in point)
    q = [(Fraction(float(quad[2 * i])), Fraction(float(quad[2 * i + 1]))) for i in range(4)]
    crosses = []
    for i in range(4):
        (ax, ay), (bx, by) = q[i], q[(i + 1) % 4]
        crosses.append((bx - ax) * (py - ay) - (by - ay) * (px - ax))
    if all(c > 0 for c in crosses) or all(c < 0 for c in crosses):
        return 1
    if any(c > 0 for c in crosses) and any(c < 0 for c in crosses):
        return -1
    return 0


# ----------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    n, m = (13, 7) if size == 0 else (9, 11)
    return Sample(
        (
            random_points(n, dtype=dtype, seed=size, device=device),
            random_quads(m, dtype=dtype, seed=5 + size, device=device),
        )
    )


def _empty(device, dtype):
    e2, e8 = torch.zeros(0, 2, dtype=dtype, device=device), torch.zeros(0, 8, dtype=dtype, device=device)
    p, q = random_points(3, dtype=dtype, device=device), random_quads(4, dtype=dtype, device=device)
    return [Sample((e2, q), out_shapes=[(0, 4)]), Sample((p, e8), out_shapes=[(3, 0)])]


def _cuda_samples(dtype):
    for n, m in ((1, 1), (300, 100), (1000, 33)):
        yield Sample((random_points(n, dtype=dtype, seed=n), random_quads(m, dtype=dtype, seed=m)))


class _InsideNet(torch.nn.Module):
    """points_in_polygons in a model: how many points each polygon holds."""

    def forward(self, points: torch.Tensor, polygons: torch.Tensor):
        return mmops.points_in_polygons(points, polygons).sum(0), op(points * 2.0, polygons)


_Z = torch.zeros
CONFORMANCE = [
    ConformanceCase(
        "points_in_polygons",
        op,
        _sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        empty=_empty,
        module=_InsideNet,
        cuda_samples=_cuda_samples,
        cuda_tol=lambda *_: dict(rtol=0, atol=0),
        bad_inputs={
            "points_3_cols": BadInput(lambda *_: (_Z(3, 3), _Z(2, 8)), r"points to be a 2-D tensor of shape \[N, 2\]"),
            "polygons_10_cols": BadInput(
                lambda *_: (_Z(3, 2), _Z(2, 10)), r"polygons to be a 2-D tensor of shape \[M, 8\]"
            ),
            "int_points": BadInput(
                lambda *_: (_Z(3, 2, dtype=torch.int32), _Z(2, 8, dtype=torch.int32)),
                "floating point dtype, but got Int",
            ),
            "dtypes_differ": BadInput(
                lambda *_: (_Z(3, 2), _Z(2, 8, dtype=torch.float64)),
                r"polygons to have the dtype of points \(Float\), but got Double",
            ),
            "polygons_on_cpu": BadInput(
                lambda *_: (_Z(3, 2, device="cuda"), _Z(2, 8)), "polygons on the device of points", cuda=True
            ),
        },
    )
]


class TestPointsInPolygonsConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", DTYPES)
def test_mmcv_vectors(dtype):
    # mmcv tests/test_ops/test_points_in_polygons.py
    points = torch.tensor([[300.0, 300.0], [400.0, 400.0], [100.0, 100], [300, 250], [100, 0]], dtype=dtype)
    polygons = torch.tensor(
        [
            [200.0, 200.0, 400.0, 400.0, 500.0, 200.0, 400.0, 100.0],
            [400.0, 400.0, 500.0, 500.0, 600.0, 300.0, 500.0, 200.0],
            [300.0, 300.0, 600.0, 700.0, 700.0, 700.0, 700.0, 100.0],
        ],
        dtype=dtype,
    )
    expected = torch.tensor([[0.0, 0, 0], [0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0]], dtype=dtype)
    assert torch.equal(mmops.points_in_polygons(points, polygons), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_random_against_exact(dtype):
    points = random_points(400, dtype=dtype, seed=1)
    quads = random_quads(30, dtype=dtype, seed=2)
    out = op(points, quads)
    assert out.shape == (400, 30) and out.dtype == dtype
    checked = 0
    for i in range(400):
        for j in range(30):
            side = exact_side(points[i].tolist(), quads[j].tolist())
            if side != 0:
                assert out[i, j].item() == (1.0 if side > 0 else 0.0), (i, j)
                checked += 1
    assert checked > 11000 and out.sum() > 100  # both outcomes occur


def test_boundary_follows_mmcv_rule():
    """mmcv's crossing rule on the unit square (0,0),(1,0),(1,1),(0,1): a point on a
    vertex or on the left, right or bottom edge is outside; on the top edge inside."""
    square = torch.tensor([[0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]], dtype=torch.float64)
    points = torch.tensor(
        [[0.5, 0.5], [0.0, 0.5], [1.0, 0.5], [0.5, 0.0], [0.5, 1.0], [0, 0], [1, 0], [1, 1], [0, 1], [1.5, 0.5]],
        dtype=torch.float64,
    )
    expected = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert op(points, square)[:, 0].tolist() == expected
    assert op(points.float(), square.float())[:, 0].tolist() == expected


def test_orientation_does_not_matter_inside():
    quads = random_quads(20, seed=3)
    points = random_points(300, seed=4)
    flipped = quads.reshape(20, 4, 2).flip(1).reshape(20, 8)
    inside = op(points, quads)
    sides = torch.tensor([[exact_side(p.tolist(), q.tolist()) for q in quads] for p in points])
    strict = sides != 0
    assert torch.equal(inside[strict], op(points, flipped)[strict])


def test_nonfinite_is_outside():
    square = torch.tensor([[0.0, 0.0, 4.0, 0.0, 4.0, 4.0, 0.0, 4.0]])
    bad = square.clone()
    bad[0, 3] = float("nan")
    points = torch.tensor([[1.0, 1.0], [float("nan"), 1.0], [float("inf"), 1.0], [1.0, float("-inf")]])
    assert op(points, square)[:, 0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert op(points, bad)[:, 0].tolist() == [0.0, 0.0, 0.0, 0.0]
    inf = square.clone()
    inf[0, 2] = float("inf")
    assert op(points[:1], inf).item() == 0.0


def test_huge_coordinates():
    square = torch.tensor([[1e7, 1e7, 1e7 + 8, 1e7, 1e7 + 8, 1e7 + 8, 1e7, 1e7 + 8]], dtype=torch.float64)
    points = torch.tensor([[1e7 + 1, 1e7 + 1], [1e7 - 1, 1e7 + 1], [1e7 + 7.5, 1e7 + 0.5]], dtype=torch.float64)
    assert op(points, square)[:, 0].tolist() == [1.0, 0.0, 1.0]
    # float32 spacing at 1e7 is 1: 1e7 + 7.5 rounds onto the edge; at 1e6 it is 1/16
    assert op((points - 9e6).float(), (square - 9e6).float())[:, 0].tolist() == [1.0, 0.0, 1.0]


def test_strided_inputs():
    points = random_points(50, seed=6)
    quads = random_quads(9, seed=7)
    wide = torch.zeros(50, 6, dtype=torch.float64)
    wide[:, 1::3] = points
    assert torch.equal(op(wide[:, 1::3], quads.t().contiguous().t()), op(points, quads))


def test_not_differentiable():
    points = random_points(4, seed=8).requires_grad_(True)
    out = op(points, random_quads(3, seed=9))
    with pytest.raises(RuntimeError):
        out.sum().backward()


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    points_in_polygons = mmcv_ops.points_in_polygons

    points = random_points(64, dtype=torch.float32, seed=10)
    quads = random_quads(12, dtype=torch.float32, seed=11)
    out = points_in_polygons(points, quads)
    assert out.dtype == torch.float32 and torch.equal(out, op(points, quads))


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_large(dtype):
    points = random_points(20000, dtype=torch.float64, seed=12, image=800.0)
    quads = random_quads(100, dtype=torch.float64, seed=13, image=800.0)
    p, q = points.to(dtype), quads.to(dtype)
    assert torch.equal(op(p.cuda(), q.cuda()).cpu(), op(p, q))
    square = torch.tensor([[0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]], dtype=dtype)
    edge = torch.tensor([[0.0, 0.5], [0.5, 1.0], [float("nan"), 0.5]], dtype=dtype)
    assert torch.equal(op(edge.cuda(), square.cuda()).cpu(), op(edge, square))
