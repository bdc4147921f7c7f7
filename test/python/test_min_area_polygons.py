"""mmops.min_area_polygons: the conformance cases, mmcv's published vectors, a brute-force
float64 reference (every direction between two points), mmcv's vertex order, degenerate
sets (duplicates, collinear, one point), non-finite and huge coordinates, the mmcv.ops
bridge and the CUDA-specific test (skipped without a GPU)."""

import itertools
import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample

import mmops

op = torch.ops.mmops.min_area_polygons
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def random_pointsets(n, *, dtype=torch.float64, seed=0, image=100.0, spread=10.0, device="cpu"):
    """9 points per set scattered around a centre (Oriented RepPoints-like)."""
    g = torch.Generator().manual_seed(seed)
    centre = torch.rand(n, 1, 2, generator=g, dtype=torch.float64) * image
    pts = centre + (torch.rand(n, 9, 2, generator=g, dtype=torch.float64) - 0.5) * spread
    return pts.reshape(n, 18).to(dtype=dtype, device=device)


def brute_force_min_area(points):
    """The smallest area over the rectangles aligned with every direction between two
    of the points (the optimum is aligned with a hull edge); float64."""
    best = math.inf
    for (ax, ay), (bx, by) in itertools.permutations(points, 2):
        length = math.hypot(bx - ax, by - ay)
        if length == 0:
            continue
        c, s = (bx - ax) / length, (by - ay) / length
        xs = [c * x + s * y for x, y in points]
        ys = [-s * x + c * y for x, y in points]
        best = min(best, (max(xs) - min(xs)) * (max(ys) - min(ys)))
    return 0.0 if best == math.inf else best


def check_rectangle(points, corners, tol):
    """corners: mmcv's order (xmax, ymin), (xmin, ymin), (xmin, ymax), (xmax, ymax) in the
    frame of a direction (c, s), c > 0, s >= 0; every point inside. Returns the area."""
    v = [(corners[2 * i], corners[2 * i + 1]) for i in range(4)]
    w = (v[0][0] - v[1][0], v[0][1] - v[1][1])  # (xmax - xmin) * (c, s)
    h = (v[2][0] - v[1][0], v[2][1] - v[1][1])  # (ymax - ymin) * (-s, c)
    width, height = math.hypot(*w), math.hypot(*h)
    assert abs(w[0] * h[0] + w[1] * h[1]) <= tol * (1 + width * height)  # a right angle
    scale = 1 + max(abs(x) for x in corners)
    assert abs(v[3][0] - (v[0][0] + h[0])) <= tol * scale and abs(v[3][1] - (v[0][1] + h[1])) <= tol * scale
    if width > tol:
        c, s = w[0] / width, w[1] / width
        assert c > -tol and s >= -tol and (c > tol or s > tol)
        if height > tol:  # h points along (-s, c): counter-clockwise from w
            assert abs(h[0] / height + s) <= 1e-3 and abs(h[1] / height - c) <= 1e-3
    for x, y in points:  # inside (projected on w and h)
        px, py = x - v[1][0], y - v[1][1]
        if width > tol:
            t = (px * w[0] + py * w[1]) / width
            assert -tol * 10 <= t <= width + tol * 10
        if height > tol:
            t = (px * h[0] + py * h[1]) / height
            assert -tol * 10 <= t <= height + tol * 10
    return width * height


# ----------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    return Sample((random_pointsets(7 if size == 0 else 12, dtype=dtype, seed=size, device=device),))


def _empty(device, dtype):
    return [Sample((torch.zeros(0, 18, dtype=dtype, device=device),), out_shapes=[(0, 8)])]


def _cuda_samples(dtype):
    for n in (1, 129, 5000):
        yield Sample((random_pointsets(n, dtype=dtype, seed=n, image=800.0, spread=60.0),))


def _cuda_tol(dtype, what, expected, sample):
    # Near-ties between two hull edges may pick the other edge (another corner order)
    # in 16-bit; the CUDA test below checks areas instead.
    return {torch.float32: dict(rtol=1e-4, atol=1e-3), torch.float64: dict(rtol=1e-10, atol=1e-9)}.get(
        dtype, dict(rtol=1e-2, atol=2.0)
    )


class _RectNet(torch.nn.Module):
    def forward(self, pointsets: torch.Tensor):
        rect = mmops.min_area_polygons(pointsets)
        return rect, op(pointsets + 1.0).sum(1)


_Z = torch.zeros
CONFORMANCE = [
    ConformanceCase(
        "min_area_polygons",
        op,
        _sample,
        dtype=torch.float64,
        dtypes=[torch.float32, torch.float64],
        empty=_empty,
        module=_RectNet,
        cuda_samples=_cuda_samples,
        cuda_tol=_cuda_tol,
        bad_inputs={
            "16_cols": BadInput(lambda *_: (_Z(3, 16),), r"pointsets to be a 2-D tensor of shape \[N, 18\]"),
            "3d": BadInput(lambda *_: (_Z(3, 9, 2),), r"pointsets to be a 2-D tensor of shape \[N, 18\]"),
            "int": BadInput(lambda *_: (_Z(3, 18, dtype=torch.int64),), "floating point dtype, but got Long"),
        },
    )
]


class TestMinAreaPolygonsConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values

MMCV_POINTSETS = [
    [1.0, 1.0, 2.0, 2.0, 1.0, 2.0, 2.0, 1.0, 1.0, 3.0, 3.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.5, 1.5],
    [1.0, 1.0, 8.0, 8.0, 1.0, 2.0, 2.0, 1.0, 1.0, 3.0, 3.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.5, 1.5],
]
MMCV_EXPECTED = [
    [3.0000, 1.0000, 1.0000, 1.0000, 1.0000, 3.0000, 3.0000, 3.0000],
    [8.0, 8.0, 2.3243, 0.0541, 0.0541, 1.6757, 5.7297, 9.6216],
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mmcv_vectors(dtype):
    # mmcv tests/test_ops/test_min_area_polygons.py (atol 1e-4 there)
    out = mmops.min_area_polygons(torch.tensor(MMCV_POINTSETS, dtype=dtype))
    torch.testing.assert_close(out.double(), torch.tensor(MMCV_EXPECTED, dtype=torch.float64), rtol=0, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_random_against_brute_force(dtype):
    sets = random_pointsets(200, dtype=dtype, seed=3)
    out = op(sets).double()
    tol = 1e-9 if dtype == torch.float64 else 2e-3
    for row, rect in zip(sets.double().tolist(), out.tolist()):
        points = list(zip(row[0::2], row[1::2]))
        area = check_rectangle(points, rect, tol)
        assert area == pytest.approx(brute_force_min_area(points), rel=tol * 10, abs=tol * 10)


def test_degenerate_sets():
    same = torch.tensor([[2.0, 3.0] * 9], dtype=torch.float64)
    assert op(same).tolist() == [[2.0, 3.0] * 4]
    # collinear (with duplicates): a zero-height rectangle spanning the segment
    line = torch.tensor([[0.0, 0.0, 1, 1, 2, 2, 3, 3, 1, 1, 0, 0, 2, 2, 3, 3, 1.5, 1.5]], dtype=torch.float64)
    out = op(line)[0].tolist()
    corners = {(round(out[2 * i], 12), round(out[2 * i + 1], 12)) for i in range(4)}
    assert corners == {(0.0, 0.0), (3.0, 3.0)}
    # duplicates do not change the rectangle
    base = random_pointsets(1, seed=4)
    dup = base.clone()
    dup[0, 16:] = dup[0, :2]
    pts = list(zip(dup[0, 0::2].tolist(), dup[0, 1::2].tolist()))
    assert check_rectangle(pts, op(dup)[0].tolist(), 1e-9) == pytest.approx(brute_force_min_area(pts), rel=1e-9)


def test_axis_aligned_square_order():
    sq = torch.tensor([[0.0, 0, 2, 0, 2, 2, 0, 2, 1, 1, 1, 0, 0, 1, 2, 1, 1, 2]], dtype=torch.float64)
    assert op(sq).tolist() == [[2.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0]]


def test_nonfinite_gives_nan():
    sets = random_pointsets(3, seed=5)
    sets[1, 4] = float("nan")
    sets[2, 7] = float("inf")
    out = op(sets)
    assert torch.isfinite(out[0]).all() and torch.isnan(out[1:]).all()


def test_huge_coordinates():
    """Far from the origin the rectangles keep their precision: each still encloses its set
    with the minimum area (corners may differ where two hull edges tie to rounding, as
    set 12 here: two rectangles 1e-11 apart in area)."""
    sets = random_pointsets(20, seed=6)
    for shift, dtype, tol in ((1e6, torch.float64, 1e-8), (1e4, torch.float32, 2e-3)):
        out = (op((sets + shift).to(dtype)).double() - shift).tolist()
        for row, rect in zip(sets.tolist(), out):
            points = list(zip(row[0::2], row[1::2]))
            area = check_rectangle(points, rect, tol)
            assert area == pytest.approx(brute_force_min_area(points), rel=tol * 10, abs=tol * 10)


def test_strided_and_not_differentiable():
    sets = random_pointsets(10, seed=7)
    wide = torch.zeros(10, 36, dtype=torch.float64)
    wide[:, ::2] = sets
    assert torch.equal(op(wide[:, ::2]), op(sets))
    out = op(sets.clone().requires_grad_(True))
    with pytest.raises(RuntimeError):
        out.sum().backward()


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    min_area_polygons = mmcv_ops.min_area_polygons

    sets = random_pointsets(32, dtype=torch.float32, seed=8)
    assert torch.equal(min_area_polygons(sets), op(sets))
    torch.testing.assert_close(
        min_area_polygons(torch.tensor(MMCV_POINTSETS)), torch.tensor(MMCV_EXPECTED), rtol=0, atol=1e-4
    )


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_areas_match_cpu(dtype):
    sets = random_pointsets(20000, seed=9, image=800.0, spread=60.0).to(dtype)
    cpu, gpu = op(sets).double(), op(sets.cuda()).cpu().double()

    def areas(r):
        v = r.reshape(-1, 4, 2)
        return (v[:, 0] - v[:, 1]).norm(dim=1) * (v[:, 2] - v[:, 1]).norm(dim=1)

    tol = {torch.float32: 1e-3, torch.float64: 1e-9}.get(dtype, 3e-2)
    torch.testing.assert_close(areas(gpu), areas(cpu), rtol=tol, atol=tol)
    if dtype in (torch.float32, torch.float64):
        close = (gpu - cpu).abs().amax(1) < 1e-2
        assert close.float().mean() > 0.999  # the same corners but for near-ties
    torch.testing.assert_close(
        op(torch.tensor(MMCV_POINTSETS).cuda()).cpu(), torch.tensor(MMCV_EXPECTED), rtol=0, atol=1e-4
    )
