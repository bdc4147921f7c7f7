"""mmops.points_in_boxes_part / _all / _cpu: the conformance cases, mmcv's published
vectors, a float64 reference away from the box faces, the boundary rule, non-finite
values, the mmcv.ops bridge and the CUDA tests (skipped without a GPU)."""

import math

import pytest
import torch
from box3d_reference import (
    boundary_margin,
    points_in_boxes_all_reference,
    points_in_boxes_part_reference,
    points_near_boxes,
    random_boxes,
)
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample

import mmops

part = torch.ops.mmops.points_in_boxes_part
all_ = torch.ops.mmops.points_in_boxes_all
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]

# mmcv tests/test_ops/test_roiaware_pool3d.py
MMCV_POINTS = [
    [1, 2, 3.3], [1.2, 2.5, 3.0], [0.8, 2.1, 3.5], [1.6, 2.6, 3.6], [0.8, 1.2, 3.9], [-9.2, 21.0, 18.2],
    [3.8, 7.9, 6.3], [4.7, 3.5, -12.2], [3.8, 7.6, -2], [-10.6, -12.9, -20], [-16, -18, 9], [-21.3, -52, -5],
    [0, 0, 0], [6, 7, 8], [-2, -3, -4],
]  # fmt: skip
MMCV_BOXES = [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.3], [-10.0, 23.0, 16.0, 10, 20, 20, 0.5]]
ROTATED_BOX = [[[0.0, 0.0, 0.0, 1.0, 20.0, 1.0, 0.523598]]]  # 30 degrees
ROTATED_POINTS = [[[4, 6.928, 0], [6.928, 4, 0], [4, -6.928, 0], [6.928, -4, 0],
                   [-4, 6.928, 0], [-6.928, 4, 0], [-4, -6.928, 0], [-6.928, -4, 0]]]  # fmt: skip


# ----------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    (b, n, m) = (2, 40, 5) if size == 0 else (3, 31, 7)
    boxes = random_boxes(b, m, seed=size)
    points = points_near_boxes(boxes, n, seed=10 + size)
    return Sample((points.to(device=device, dtype=dtype), boxes.to(device=device, dtype=dtype)))


def _empty(part_op):
    def make(device, dtype):
        f = dict(device=device, dtype=dtype)
        boxes, points = random_boxes(2, 3).to(**f), torch.zeros(2, 4, 3, **f)
        samples = [
            (torch.zeros(2, 0, 3, **f), boxes, (2, 0) if part_op else (2, 0, 3)),
            (points, torch.zeros(2, 0, 7, **f), (2, 4) if part_op else (2, 4, 0)),
            (torch.zeros(0, 4, 3, **f), torch.zeros(0, 3, 7, **f), (0, 4) if part_op else (0, 4, 3)),
        ]
        return [Sample((p, q), out_shapes=[shape]) for p, q, shape in samples]

    return make


def _cuda_samples(dtype):
    for b, n, m in ((1, 1, 1), (2, 700, 300), (3, 1000, 33)):
        boxes = random_boxes(b, m, seed=m, extent=30.0)
        points = points_near_boxes(boxes, n, seed=n)
        yield Sample((points.to(dtype), boxes.to(dtype)))


class _InsideNet(torch.nn.Module):
    """points_in_boxes in a model: per box its point count, per point its first box."""

    def forward(self, points: torch.Tensor, boxes: torch.Tensor):
        counts = mmops.points_in_boxes_all(points, boxes).sum(1)
        return counts, part(points * 2.0, boxes * 2.0), mmops.points_in_boxes_part(points, boxes)


_Z = torch.zeros


def _bad_inputs(name):
    return {
        "points_2_cols": BadInput(
            lambda *_: (_Z(1, 3, 2), _Z(1, 2, 7)), r"points to be a 3-D tensor of shape \[B, N, 3\]"
        ),
        "points_2d": BadInput(lambda *_: (_Z(3, 3), _Z(1, 2, 7)), r"points to be a 3-D tensor"),
        "boxes_6_cols": BadInput(
            lambda *_: (_Z(1, 3, 3), _Z(1, 2, 6)), r"boxes to be a 3-D tensor of shape \[B, M, 7\]"
        ),
        "batch_differs": BadInput(
            lambda *_: (_Z(2, 3, 3), _Z(1, 2, 7)), r"boxes to have the batch size of points \(2\), but got 1", meta=True
        ),
        "int_points": BadInput(
            lambda *_: (_Z(1, 3, 3, dtype=torch.int32), _Z(1, 2, 7, dtype=torch.int32)),
            "floating point dtype, but got Int",
        ),
        "dtypes_differ": BadInput(
            lambda *_: (_Z(1, 3, 3), _Z(1, 2, 7, dtype=torch.float64)),
            r"boxes to have the dtype of points \(Float\), but got Double",
        ),
        "boxes_on_cpu": BadInput(
            lambda *_: (_Z(1, 3, 3, device="cuda"), _Z(1, 2, 7)), "boxes on the device of points", cuda=True
        ),
    }


CONFORMANCE = [
    ConformanceCase(
        "points_in_boxes_part",
        part,
        _sample,
        dtypes=DTYPES,
        empty=_empty(True),
        module=_InsideNet,
        cuda_samples=_cuda_samples,
        cuda_tol=lambda *_: dict(rtol=0, atol=0),
        bad_inputs=_bad_inputs("part"),
    ),
    ConformanceCase(
        "points_in_boxes_all",
        all_,
        _sample,
        dtypes=DTYPES,
        empty=_empty(False),
        cuda_samples=_cuda_samples,
        cuda_tol=lambda *_: dict(rtol=0, atol=0),
        bad_inputs=_bad_inputs("all"),
    ),
]


class TestPointsInBoxesConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- known vectors


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mmcv_vectors_all_and_cpu(dtype):
    points = torch.tensor([MMCV_POINTS], dtype=dtype)
    boxes = torch.tensor([MMCV_BOXES], dtype=dtype)
    expected = torch.zeros(1, 15, 2, dtype=torch.int32)
    expected[0, :5, 0] = 1
    expected[0, 5, 1] = 1
    for fn in (mmops.points_in_boxes_all, mmops.points_in_boxes_cpu):
        out = fn(points, boxes)
        assert out.shape == (1, 15, 2) and out.dtype == torch.int32
        assert torch.equal(out, expected)
    rotated = mmops.points_in_boxes_cpu(
        torch.tensor(ROTATED_POINTS, dtype=dtype), torch.tensor(ROTATED_BOX, dtype=dtype)
    )
    assert rotated[0, :, 0].tolist() == [0, 0, 1, 0, 1, 0, 0, 0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mmcv_vectors_part(dtype):
    boxes = torch.tensor([[MMCV_BOXES[0]], [MMCV_BOXES[1]]], dtype=dtype)
    points = torch.tensor([MMCV_POINTS[:8], MMCV_POINTS[8:] + [[6, 4, 9]]], dtype=dtype)
    out = mmops.points_in_boxes_part(points, boxes)
    assert out.dtype == torch.int32
    assert out.tolist() == [[0, 0, 0, 0, 0, -1, -1, -1], [-1] * 8]
    rotated = mmops.points_in_boxes_part(
        torch.tensor(ROTATED_POINTS, dtype=dtype), torch.tensor(ROTATED_BOX, dtype=dtype)
    )
    assert rotated.tolist() == [[-1, -1, 0, -1, 0, -1, -1, -1]]


# ----------------------------------------------------------------------------- reference


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_random_against_reference(dtype):
    boxes = random_boxes(3, 40, seed=3, extent=8.0)  # overlapping boxes: part picks the lowest index
    points = points_near_boxes(boxes, 500, seed=4)
    p, q = points.to(dtype), boxes.to(dtype)
    clear = boundary_margin(p, q) > (1e-9 if dtype == torch.float64 else 1e-4)
    inside = all_(p, q)
    expected = points_in_boxes_all_reference(p, q)
    assert torch.equal(inside[clear], expected[clear])
    assert inside.sum() > 1000 and (inside.sum(-1) > 1).any()  # inside, and in several boxes at once
    first = part(p, q)
    rows = clear.all(-1)
    assert torch.equal(first[rows], points_in_boxes_part_reference(p, q)[rows])
    # part agrees with all: the first set column
    m = inside.shape[-1]
    from_all = torch.where(inside.bool(), torch.arange(m, dtype=torch.int32), m).amin(-1)
    assert torch.equal(first, torch.where(from_all < m, from_all, -1).int())


def test_boundary_rule():
    """Strict in x and y (a point on a side face is outside), inclusive in z (on the top or
    bottom face is inside), as mmcv."""
    box = torch.tensor([[[0.0, 0.0, 0.0, 2.0, 4.0, 2.0, 0.0]]], dtype=torch.float64)
    points = torch.tensor(
        [[[0.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.0, 2.0, 1.0], [-1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0],
          [0.0, 0.0, 2.0 + 1e-12], [0.999, 1.999, 1.999]]],
        dtype=torch.float64,
    )  # fmt: skip
    assert all_(points, box)[0, :, 0].tolist() == [1, 0, 0, 0, 1, 1, 0, 1]
    # float32: 2 + 1e-12 rounds to 2.0, onto the top face (inside)
    assert all_(points.float(), box.float())[0, :, 0].tolist() == [1, 0, 0, 0, 1, 1, 1, 1]


def test_rotation_direction():
    """rz turns the box counter-clockwise: a long box along x turned by +90 degrees is long
    along y."""
    box = torch.tensor([[[0.0, 0.0, 0.0, 10.0, 1.0, 1.0, math.pi / 2]]], dtype=torch.float64)
    points = torch.tensor([[[0.0, 4.0, 0.5], [4.0, 0.0, 0.5], [0.0, -4.0, 0.5]]], dtype=torch.float64)
    assert all_(points, box)[0, :, 0].tolist() == [1, 0, 1]


def test_nonfinite_is_outside():
    box = torch.tensor([[[0.0, 0.0, 0.0, 4.0, 4.0, 4.0, 0.0]]])
    points = torch.tensor([[[0.5, 0.5, 1.0], [math.nan, 0.5, 1.0], [0.5, math.inf, 1.0], [0.5, 0.5, -math.inf]]])
    assert all_(points, box)[0, :, 0].tolist() == [1, 0, 0, 0]
    assert part(points, box)[0].tolist() == [0, -1, -1, -1]
    for col, value in ((0, math.nan), (3, math.inf), (5, math.inf), (6, math.nan), (6, math.inf)):
        bad = box.clone()
        bad[0, 0, col] = value
        assert all_(points, bad).sum() == 0, (col, value)
        assert part(points, bad).tolist() == [[-1, -1, -1, -1]]


def test_degenerate_boxes_hold_nothing_in_xy():
    boxes = torch.tensor([[[0.0, 0.0, 0.0, 0.0, 4.0, 4.0, 0.0], [0.0, 0.0, 0.0, 4.0, 4.0, -1.0, 0.0]]])
    points = torch.tensor([[[0.0, 0.0, 1.0], [0.0, 0.0, -0.5]]])
    assert all_(points, boxes).sum() == 0


def test_strided_inputs():
    boxes = random_boxes(2, 9, seed=6)
    points = points_near_boxes(boxes, 50, seed=7)
    wide = torch.zeros(2, 50, 9, dtype=torch.float64)
    wide[..., 1::3] = points
    strided_boxes = boxes.transpose(1, 2).contiguous().transpose(1, 2)
    assert torch.equal(all_(wide[..., 1::3], strided_boxes), all_(points, boxes))
    assert torch.equal(part(wide[..., 1::3], strided_boxes), part(points, boxes))


def test_half_inputs_compute_in_float():
    boxes = random_boxes(1, 10, seed=8)
    points = points_near_boxes(boxes, 200, seed=9)
    for dtype in (torch.float16, torch.bfloat16):
        p, q = points.to(dtype), boxes.to(dtype)
        assert torch.equal(all_(p, q), all_(p.float(), q.float()))


def test_not_differentiable():
    boxes = random_boxes(1, 3, seed=10)
    points = points_near_boxes(boxes, 4, seed=11).requires_grad_(True)
    assert not part(points, boxes).requires_grad
    assert not all_(points, boxes).requires_grad


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    boxes = random_boxes(2, 12, seed=12).float()
    points = points_near_boxes(boxes, 64, seed=13).float()
    out = mmcv_ops.points_in_boxes_cpu(points, boxes)
    assert out.dtype == torch.int32 and torch.equal(out, all_(points, boxes))


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_large(dtype):
    boxes = random_boxes(2, 300, seed=14, extent=60.0).to(dtype)
    points = points_near_boxes(boxes, 20000, seed=15).to(dtype)
    assert torch.equal(all_(points.cuda(), boxes.cuda()).cpu(), all_(points, boxes))
    assert torch.equal(part(points.cuda(), boxes.cuda()).cpu(), part(points, boxes))


@pytest.mark.cuda
def test_cuda_known_vectors_and_nonfinite():
    points = torch.tensor([MMCV_POINTS + [[math.nan, 0.0, 0.0]]]).cuda()
    boxes = torch.tensor([MMCV_BOXES]).cuda()
    assert torch.equal(all_(points, boxes).cpu(), all_(points.cpu(), boxes.cpu()))
    assert part(points, boxes).cpu()[0].tolist() == [0] * 5 + [1] + [-1] * 10
