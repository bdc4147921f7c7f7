"""mmops.roipoint_pool3d: the conformance case, mmcv's published vector, a float64
reference, the repeat / empty rules, non-finite values, the mmcv.ops bridge and the CUDA
tests (skipped without a GPU)."""

import math

import pytest
import torch
from box3d_reference import boundary_margin, points_near_boxes, random_boxes, roipoint_pool3d_reference
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample

import mmops

op = torch.ops.mmops.roipoint_pool3d
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _inputs(b, n, m, c, *, seed, dtype=torch.float64, device="cpu"):
    boxes = random_boxes(b, m, seed=seed)
    points = points_near_boxes(boxes, n, seed=seed + 1)
    g = torch.Generator().manual_seed(seed + 2)
    feats = torch.randn(b, n, c, generator=g, dtype=torch.float64)
    return tuple(t.to(device=device, dtype=dtype) for t in (points, feats, boxes))


# ----------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    # no size of 3 or 7 in size 0: torch.compile would tie it to the static xyz / box columns
    b, n, m, c, s = (2, 40, 5, 4, 6) if size == 0 else (3, 33, 4, 2, 6)  # s fixed: test_aoti
    return Sample((*_inputs(b, n, m, c, seed=size, dtype=dtype, device=device), s))


def _empty(device, dtype):
    f = dict(device=device, dtype=dtype)
    points, feats, boxes = _inputs(2, 10, 3, 4, seed=3, dtype=dtype, device=device)
    return [
        Sample((points, feats, boxes[:, :0], 4), out_shapes=[(2, 0, 4, 7), (2, 0)]),
        Sample((points[:, :0], feats[:, :0], boxes, 4), out_shapes=[(2, 3, 4, 7), (2, 3)]),
        Sample((points, torch.zeros(2, 10, 0, **f), boxes, 4), out_shapes=[(2, 3, 4, 3), (2, 3)]),
    ]


def _cuda_samples(dtype):
    for b, n, m, c, s in ((1, 1, 1, 1, 1), (2, 3000, 40, 5, 64), (1, 2000, 7, 3, 700)):
        yield Sample((*_inputs(b, n, m, c, seed=n, dtype=dtype), s))


class _PoolNet(torch.nn.Module):
    """roipoint_pool3d in a model: the module, and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.pool = mmops.RoIPointPool3d(num_sampled_points=4)

    def forward(self, points: torch.Tensor, feats: torch.Tensor, boxes: torch.Tensor):
        pooled, empty = self.pool(points, feats, boxes)
        scaled, _ = torch.ops.mmops.roipoint_pool3d(points * 2.0, feats, boxes * 2.0, 3)
        return pooled.sum(2), empty, scaled


_Z = torch.zeros


def _bad(points, feats, boxes, s=4):
    return lambda *_: (points, feats, boxes, s)


CONFORMANCE = [
    ConformanceCase(
        "roipoint_pool3d",
        op,
        _sample,
        dtypes=DTYPES,
        empty=_empty,
        module=_PoolNet,
        cuda_samples=_cuda_samples,
        cuda_tol=lambda *_: dict(rtol=0, atol=0),
        bad_inputs={
            "points_2_cols": BadInput(_bad(_Z(1, 3, 2), _Z(1, 3, 4), _Z(1, 2, 7)), r"points to be a 3-D tensor"),
            "features_2d": BadInput(_bad(_Z(1, 3, 3), _Z(3, 4), _Z(1, 2, 7)), r"point_features to be a 3-D tensor"),
            "features_rows": BadInput(
                _bad(_Z(1, 3, 3), _Z(1, 4, 4), _Z(1, 2, 7)), r"point_features to start with the \[B, N\]", meta=True
            ),
            "boxes_6_cols": BadInput(_bad(_Z(1, 3, 3), _Z(1, 3, 4), _Z(1, 2, 6)), r"boxes3d to be a 3-D tensor"),
            "boxes_batch": BadInput(
                _bad(_Z(1, 3, 3), _Z(1, 3, 4), _Z(2, 2, 7)), r"boxes3d to have the batch size of points", meta=True
            ),
            "int_points": BadInput(
                _bad(_Z(1, 3, 3, dtype=torch.int32), _Z(1, 3, 4, dtype=torch.int32), _Z(1, 2, 7, dtype=torch.int32)),
                "floating point dtype, but got Int",
            ),
            "dtypes_differ": BadInput(
                _bad(_Z(1, 3, 3), _Z(1, 3, 4, dtype=torch.float64), _Z(1, 2, 7)), r"the dtype of points \(Float\)"
            ),
            "zero_samples": BadInput(
                _bad(_Z(1, 3, 3), _Z(1, 3, 4), _Z(1, 2, 7), 0),
                r"num_sampled_points must be in \[1, 2\^31 - 1\], but got 0",
            ),
            "huge_samples": BadInput(
                _bad(_Z(1, 3, 3), _Z(1, 3, 4), _Z(1, 2, 7), 2**40), r"num_sampled_points must be in", meta=True
            ),
            "boxes_on_cpu": BadInput(
                lambda *_: (_Z(1, 3, 3, device="cuda"), _Z(1, 3, 4, device="cuda"), _Z(1, 2, 7), 4),
                "on the device of points",
                cuda=True,
            ),
        },
    )
]


class TestRoIPointPool3dConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_mmcv_vector(dtype):
    # mmcv tests/test_ops/test_roipoint_pool3d.py
    points = torch.tensor(
        [[1, 2, 3.3], [1.2, 2.5, 3.0], [0.8, 2.1, 3.5], [1.6, 2.6, 3.6], [0.8, 1.2, 3.9], [-9.2, 21.0, 18.2],
         [3.8, 7.9, 6.3], [4.7, 3.5, -12.2], [3.8, 7.6, -2], [-10.6, -12.9, -20], [-16, -18, 9],
         [-21.3, -52, -5], [0, 0, 0], [6, 7, 8], [-2, -3, -4]],
        dtype=dtype,
    ).unsqueeze(0)  # fmt: skip
    rois = torch.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.3], [-10.0, 23.0, 16.0, 10, 20, 20, 0.5]]], dtype=dtype)
    feat, empty = mmops.RoIPointPool3d(num_sampled_points=4)(points, points.clone(), rois)
    first = [[1, 2, 3.3], [1.2, 2.5, 3], [0.8, 2.1, 3.5], [1.6, 2.6, 3.6]]
    expected = torch.tensor([[[p + p for p in first], [[-9.2, 21, 18.2] * 2] * 4]], dtype=dtype)
    assert feat.shape == (1, 2, 4, 6) and feat.dtype == dtype
    assert torch.equal(feat, expected)
    assert empty.dtype == torch.int32 and empty.tolist() == [[0, 0]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("s", [1, 7, 64])
def test_random_against_reference(dtype, s):
    points, feats, boxes = _inputs(2, 300, 12, 5, seed=4)
    boxes[0, 3, 0] += 1000.0  # a box far from every point: empty
    near_a_face = (boundary_margin(points, boxes) < 1e-4).any(-1)  # where float32 and float64 may differ
    points[near_a_face] += 1000.0
    p, f, q = points.to(dtype), feats.to(dtype), boxes.to(dtype)
    pooled, empty = op(p, f, q, s)
    ref_pooled, ref_empty = roipoint_pool3d_reference(p, f, q, s)
    assert torch.equal(empty, ref_empty) and empty[0, 3] == 1 and (empty == 0).sum() > 15
    torch.testing.assert_close(pooled.double(), ref_pooled, rtol=0, atol=0)


def test_repeat_rule_and_truncation():
    """Points 1, 3 and 4 are inside: with 7 slots they repeat as 1, 3, 4, 1, 3, 4, 1; with 2
    slots only the first two (index order) are kept."""
    box = torch.tensor([[[0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0]]], dtype=torch.float64)
    points = torch.tensor([[[5.0, 0, 1], [0.1, 0, 1], [0, 5.0, 1], [0.2, 0, 1], [0.3, 0, 1]]], dtype=torch.float64)
    feats = torch.arange(5, dtype=torch.float64).reshape(1, 5, 1)
    pooled, empty = op(points, feats, box, 7)
    assert pooled[0, 0, :, 3].tolist() == [1, 3, 4, 1, 3, 4, 1] and empty.item() == 0
    assert op(points, feats, box, 2)[0][0, 0, :, 3].tolist() == [1, 3]


def test_nonfinite():
    box = torch.tensor([[[0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0], [0.0, 0.0, 0.0, 2.0, 2.0, math.nan, 0.0]]])
    points = torch.tensor([[[math.nan, 0, 1], [0.1, math.inf, 1], [0.25, 0, 1]]])
    feats = torch.tensor([[[1.0], [2.0], [math.nan]]])
    pooled, empty = op(points, feats, box, 2)
    assert empty.tolist() == [[0, 1]]  # non-finite points and boxes hold nothing
    assert pooled[0, 0, :, 0].tolist() == [0.25, 0.25] and pooled[0, 0, :, 3].isnan().all()  # features as they are
    assert torch.equal(pooled[0, 1], torch.zeros(2, 4))


def test_strided_inputs():
    points, feats, boxes = _inputs(2, 60, 5, 4, seed=5)
    wide = torch.zeros(2, 60, 8, dtype=torch.float64)
    wide[..., 2:5] = points
    out = op(wide[..., 2:5], feats.transpose(1, 2).contiguous().transpose(1, 2), boxes, 9)
    ref = op(points, feats, boxes, 9)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])


def test_not_differentiable():
    points, feats, boxes = _inputs(1, 20, 3, 2, seed=6)
    pooled, _ = op(points, feats.requires_grad_(True), boxes, 4)
    with pytest.raises(RuntimeError):
        pooled.sum().backward()


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    points, feats, boxes = _inputs(2, 80, 6, 3, seed=7, dtype=torch.float32)
    pooled, empty = mmcv_ops.RoIPointPool3d(num_sampled_points=5)(points, feats, boxes)
    ref = op(points, feats, boxes, 5)
    assert torch.equal(pooled, ref[0]) and torch.equal(empty, ref[1])


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_large(dtype):
    points, feats, boxes = _inputs(2, 16384, 64, 16, seed=8, dtype=dtype)
    for s in (1, 100, 512, 3000):
        out = op(points.cuda(), feats.cuda(), boxes.cuda(), s)
        ref = op(points, feats, boxes, s)
        assert torch.equal(out[0].cpu(), ref[0]) and torch.equal(out[1].cpu(), ref[1])


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cuda_matches_cpu_crowded(dtype):
    """About 5000 points in a box (several 4096-point chunks of the CUDA select step, which
    stops in the chunk where it holds S), S inside the first chunk, past it and above the
    count (repeats), an empty box, and 1 or 2 channels (4 or 8 lanes a row in the CUDA fill)."""
    boxes = random_boxes(2, 1, seed=9)
    points = points_near_boxes(boxes, 30000, seed=10)
    boxes = torch.cat([boxes, boxes, boxes], 1)
    boxes[:, 1, 3:6] *= 0.5  # fewer points
    boxes[:, 2, :2] += 100.0  # none
    for c in (1, 2):
        feats = torch.randn(2, 30000, c, generator=torch.Generator().manual_seed(c), dtype=torch.float64)
        p, f, q = points.to(dtype), feats.to(dtype), boxes.to(dtype)
        inside = torch.ops.mmops.points_in_boxes_all(p, q).sum(1)
        assert (inside[:, 0] > 4097).all() and (inside[:, 0] < 9000).all()
        for s in (1, 4095, 4097, 9000):
            out = op(p.cuda(), f.cuda(), q.cuda(), s)
            ref = op(p, f, q, s)
            assert torch.equal(out[0].cpu(), ref[0]) and torch.equal(out[1].cpu(), ref[1])
            assert ref[1][:, 2].eq(1).all() and ref[1][:, :2].eq(0).all()
