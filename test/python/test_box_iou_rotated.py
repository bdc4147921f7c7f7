"""mmops box_iou_rotated and box_iou_quadri: the conformance cases, then the exact
Fraction-based reference (polygon_reference.py), mmcv's published vectors, the
geometric edge cases, low precision, strides, the mmcv.ops bridge and CUDA."""

import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from polygon_reference import quadri_overlap, rotated_overlap

import mmops

rot_op = torch.ops.mmops.box_iou_rotated
quad_op = torch.ops.mmops.box_iou_quadri

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
PI = math.pi


# ----------------------------------------------------------------------------- references and inputs


def rotated_ref(b1, b2, mode="iou", aligned=False, clockwise=True):
    """Exact overlaps (float64) of the boxes' values; clockwise=False negates the angles."""
    a = b1.detach().double().cpu().tolist()
    b = b2.detach().double().cpu().tolist()
    if not clockwise:
        a = [r[:4] + [-r[4]] for r in a]
        b = [r[:4] + [-r[4]] for r in b]
    iof = mode == "iof"
    if aligned:
        return torch.tensor([rotated_overlap(x, y, iof) for x, y in zip(a, b)], dtype=torch.float64)
    return torch.tensor([[rotated_overlap(x, y, iof) for y in b] for x in a], dtype=torch.float64).reshape(
        len(a), len(b)
    )


def quadri_ref(b1, b2, mode="iou", aligned=False):
    a = b1.detach().double().cpu().tolist()
    b = b2.detach().double().cpu().tolist()
    iof = mode == "iof"
    if aligned:
        return torch.tensor([quadri_overlap(x, y, iof) for x, y in zip(a, b)], dtype=torch.float64)
    return torch.tensor([[quadri_overlap(x, y, iof) for y in b] for x in a], dtype=torch.float64).reshape(
        len(a), len(b)
    )


def random_rotated(n, *, image=20.0, side=8.0, seed=0, dtype=torch.float32, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g, dtype=torch.float64) * image
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * side + 0.5
    a = (torch.rand(n, 1, generator=g, dtype=torch.float64) * 2 - 1) * PI
    return torch.cat([xy, wh, a], 1).to(dtype=dtype, device=device)


def corners(boxes):
    """[N, 8] corners of [N, 5] rotated boxes (float64)."""
    b = boxes.double()
    c, s = torch.cos(b[:, 4]), torch.sin(b[:, 4])
    ux, uy = c * b[:, 2] / 2, s * b[:, 2] / 2
    vx, vy = -s * b[:, 3] / 2, c * b[:, 3] / 2
    pts = [(-ux - vx, -uy - vy), (ux - vx, uy - vy), (ux + vx, uy + vy), (-ux + vx, -uy + vy)]
    return torch.stack([t for x, y in pts for t in (b[:, 0] + x, b[:, 1] + y)], 1)


def random_quadri(n, *, seed=0, dtype=torch.float32, device="cpu"):
    """Convex quadrilaterals: points at sorted random angles on ellipses, half of them
    listed clockwise."""
    g = torch.Generator().manual_seed(seed)
    centre = torch.rand(n, 1, 2, generator=g, dtype=torch.float64) * 20
    radius = torch.rand(n, 1, 2, generator=g, dtype=torch.float64) * 6 + 0.5
    ang = torch.sort(torch.rand(n, 4, generator=g, dtype=torch.float64) * 2 * PI, 1)[0]
    pts = centre + radius * torch.stack([torch.cos(ang), torch.sin(ang)], 2)
    flip = torch.arange(n) % 2 == 1
    pts[flip] = pts[flip].flip(1)
    return pts.reshape(n, 8).to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------- conformance


def _rot_sample(mode, aligned, clockwise):
    def sample(device, dtype, size):
        n, m = (7, 9) if size == 0 else (11, 13)
        if aligned:
            m = n
        b1 = random_rotated(n, seed=1 + size, dtype=dtype, device=device)
        b2 = random_rotated(m, seed=2 + size, dtype=dtype, device=device)
        return Sample((b1, b2, mode, aligned, clockwise))

    return sample


def _quad_sample(mode, aligned):
    def sample(device, dtype, size):
        n, m = (7, 9) if size == 0 else (11, 13)
        if aligned:
            m = n
        b1 = random_quadri(n, seed=1 + size, dtype=dtype, device=device)
        b2 = random_quadri(m, seed=2 + size, dtype=dtype, device=device)
        return Sample((b1, b2, mode, aligned))

    return sample


def _empty(cols, extra, aligned):
    def empty(device, dtype):
        z = lambda k: torch.zeros(k, cols, dtype=dtype, device=device)  # noqa: E731
        if aligned:
            return [Sample((z(0), z(0), *extra), out_shapes=[(0,)])]
        return [
            Sample((z(0), z(3), *extra), out_shapes=[(0, 3)]),
            Sample((z(3), z(0), *extra), out_shapes=[(3, 0)]),
            Sample((z(0), z(0), *extra), out_shapes=[(0, 0)]),
        ]

    return empty


def _cuda_tol(dtype, what, expected, sample):
    # CUDA's sin/cos differ from the host's by an ulp: near-degenerate clips move a little.
    return {
        torch.float32: dict(rtol=1e-4, atol=1e-4),
        torch.float64: dict(rtol=1e-9, atol=1e-9),
        torch.float16: dict(rtol=2e-3, atol=2e-3),
        torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
    }[dtype]


def _rot_cuda_samples(mode, aligned, clockwise):
    def samples(dtype):
        for n, m in ((1, 1), (31, 33), (257, 300), (100, 1000)):
            if aligned:
                m = n
            b1 = random_rotated(n, image=60.0, seed=n, dtype=dtype)
            b2 = random_rotated(m, image=60.0, seed=m + 7, dtype=dtype)
            yield Sample((b1, b2, mode, aligned, clockwise))

    return samples


def _quad_cuda_samples(mode, aligned):
    def samples(dtype):
        for n, m in ((1, 1), (33, 31), (257, 300)):
            if aligned:
                m = n
            yield Sample(
                (random_quadri(n, seed=n, dtype=dtype), random_quadri(m, seed=m + 3, dtype=dtype), mode, aligned)
            )

    return samples


class _Overlaps(torch.nn.Module):
    """The op and the mmcv-style wrapper, in both modes and conventions."""

    def forward(self, b1: torch.Tensor, b2: torch.Tensor):
        iou = torch.ops.mmops.box_iou_rotated(b1 * 1.0, b2, "iou", False, True)
        iof = mmops.box_iou_rotated(b1, b2, "iof", False, False)
        return iou + 1, iof


class _QuadOverlaps(torch.nn.Module):
    def forward(self, b1: torch.Tensor, b2: torch.Tensor):
        return torch.ops.mmops.box_iou_quadri(b1, b2, "iou", False) * 2, mmops.box_iou_quadri(b1, b2, "iof")


_Z = torch.zeros
ROT_BAD = {
    "boxes1_4_cols": BadInput(
        lambda *_: (_Z(3, 4), _Z(2, 5), "iou", False, True), r"boxes1 to be a 2-D tensor of shape \[N, 5\]", meta=True
    ),
    "boxes2_1d": BadInput(
        lambda *_: (_Z(3, 5), _Z(5), "iou", False, True), r"boxes2 to be a 2-D tensor of shape \[M, 5\]", meta=True
    ),
    "long": BadInput(
        lambda *_: (_Z(3, 5, dtype=torch.long), _Z(2, 5, dtype=torch.long), "iou", False, True),
        "boxes1 to have a floating point dtype, but got Long",
    ),
    "dtype_mismatch": BadInput(
        lambda *_: (_Z(3, 5), _Z(2, 5, dtype=torch.float64), "iou", False, True),
        r"boxes2 to have the dtype of boxes1 \(Float\), but got Double",
    ),
    "mode": BadInput(
        lambda *_: (_Z(3, 5), _Z(2, 5), "giou", False, True), 'mode must be "iou" or "iof", but got "giou"', meta=True
    ),
    "aligned_sizes": BadInput(
        lambda *_: (_Z(3, 5), _Z(2, 5), "iou", True, True),
        "aligned=True needs as many boxes1 as boxes2, but got 3 and 2",
    ),
    "device": BadInput(
        lambda *_: (_Z(3, 5, device="cuda"), _Z(2, 5), "iou", False, True), "boxes2 on the device of boxes1", cuda=True
    ),
}
QUAD_BAD = {
    "boxes1_5_cols": BadInput(
        lambda *_: (_Z(3, 5), _Z(2, 8), "iou", False), r"boxes1 to be a 2-D tensor of shape \[N, 8\]", meta=True
    ),
    "mode": BadInput(lambda *_: (_Z(3, 8), _Z(2, 8), "IoU", False), 'mode must be "iou" or "iof", but got "IoU"'),
}

CONFORMANCE = [
    ConformanceCase(
        f"box_iou_rotated_{mode}_{'aligned' if aligned else 'all'}_{'cw' if cw else 'ccw'}",
        rot_op,
        _rot_sample(mode, aligned, cw),
        dtypes=DTYPES,
        empty=_empty(5, (mode, aligned, cw), aligned),
        cuda_samples=_rot_cuda_samples(mode, aligned, cw),
        cuda_tol=_cuda_tol,
        bad_inputs=ROT_BAD if (mode, aligned, cw) == ("iou", False, True) else {},
        module=_Overlaps if (mode, aligned, cw) == ("iou", False, True) else None,
    )
    for mode, aligned, cw in (("iou", False, True), ("iof", False, True), ("iou", True, False), ("iof", True, True))
] + [
    ConformanceCase(
        f"box_iou_quadri_{mode}_{'aligned' if aligned else 'all'}",
        quad_op,
        _quad_sample(mode, aligned),
        dtypes=DTYPES,
        empty=_empty(8, (mode, aligned), aligned),
        cuda_samples=_quad_cuda_samples(mode, aligned),
        cuda_tol=_cuda_tol,
        bad_inputs=QUAD_BAD if (mode, aligned) == ("iou", False) else {},
        module=_QuadOverlaps if (mode, aligned) == ("iou", False) else None,
    )
    for mode, aligned in (("iou", False), ("iof", True))
]


class TestBoxIouRotatedConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize("mode", ["iou", "iof"])
@pytest.mark.parametrize("clockwise", [True, False])
def test_rotated_against_exact_reference(mode, clockwise):
    b1 = random_rotated(12, seed=5, dtype=torch.float64)
    b2 = random_rotated(10, seed=6, dtype=torch.float64)
    exp = rotated_ref(b1, b2, mode, clockwise=clockwise)
    assert (exp > 0).sum() > 12  # not a vacuous comparison
    torch.testing.assert_close(rot_op(b1, b2, mode, False, clockwise), exp, rtol=1e-10, atol=1e-12)
    f1, f2 = b1.float(), b2.float()
    torch.testing.assert_close(
        rot_op(f1, f2, mode, False, clockwise),
        rotated_ref(f1, f2, mode, clockwise=clockwise).float(),
        rtol=0,
        atol=1e-5,
    )
    aligned = rot_op(b1[:10], b2, mode, True, clockwise)
    torch.testing.assert_close(aligned, exp[:10].diagonal(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["iou", "iof"])
def test_quadri_against_exact_reference(mode):
    b1 = random_quadri(12, seed=5, dtype=torch.float64)
    b2 = random_quadri(10, seed=6, dtype=torch.float64)
    exp = quadri_ref(b1, b2, mode)
    assert (exp > 0).sum() > 12
    torch.testing.assert_close(quad_op(b1, b2, mode, False), exp, rtol=1e-10, atol=1e-12)
    f1, f2 = b1.float(), b2.float()
    torch.testing.assert_close(quad_op(f1, f2, mode, False), quadri_ref(f1, f2, mode).float(), rtol=0, atol=1e-5)
    torch.testing.assert_close(quad_op(b1[:10], b2, mode, True), exp[:10].diagonal(), rtol=1e-10, atol=1e-12)


def test_quadri_of_rotated_corners_equals_rotated():
    b1 = random_rotated(9, seed=8, dtype=torch.float64)
    b2 = random_rotated(8, seed=9, dtype=torch.float64)
    torch.testing.assert_close(quad_op(corners(b1), corners(b2)), rot_op(b1, b2), rtol=1e-9, atol=1e-12)


MMCV_B1 = [[1.0, 1.0, 3.0, 4.0, 0.5], [2.0, 2.0, 3.0, 4.0, 0.6], [7.0, 7.0, 8.0, 8.0, 0.4]]
MMCV_B2 = [[0.0, 2.0, 2.0, 5.0, 0.3], [2.0, 1.0, 3.0, 3.0, 0.5], [5.0, 5.0, 6.0, 7.0, 0.4]]
MMCV_IOU = [[0.3708, 0.4351, 0.0000], [0.1104, 0.4487, 0.0424], [0.0000, 0.0000, 0.3622]]
MMCV_IOF = [[0.4959, 0.5306, 0.0000], [0.1823, 0.5420, 0.1832], [0.0000, 0.0000, 0.4404]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode,expected", [("iou", MMCV_IOU), ("iof", MMCV_IOF)])
def test_mmcv_rotated_vectors(dtype, mode, expected):
    # mmcv tests/test_ops/test_box_iou_rotated.py (cw, then ccw with negated angles)
    b1, b2 = torch.tensor(MMCV_B1, dtype=dtype), torch.tensor(MMCV_B2, dtype=dtype)
    exp = torch.tensor(expected)
    tol = dict(rtol=0, atol=1e-4 if dtype in (torch.float32, torch.float64) else 2e-2)
    torch.testing.assert_close(mmops.box_iou_rotated(b1, b2, mode).float(), exp, **tol)
    torch.testing.assert_close(mmops.box_iou_rotated(b1, b2, mode, aligned=True).float(), exp.diagonal(), **tol)
    flipped1, flipped2 = b1.clone(), b2.clone()
    flipped1[:, 4] *= -1
    flipped2[:, 4] *= -1
    torch.testing.assert_close(mmops.box_iou_rotated(flipped1, flipped2, mode, clockwise=False).float(), exp, **tol)


MMCV_Q1 = [
    [1.0, 1.0, 3.0, 4.0, 4.0, 4.0, 4.0, 1.0],
    [2.0, 2.0, 3.0, 4.0, 4.0, 2.0, 3.0, 1.0],
    [7.0, 7.0, 8.0, 8.0, 9.0, 7.0, 8.0, 6.0],
]
MMCV_Q2 = [
    [0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0, 0.0],
    [2.0, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0, 1.0],
    [7.0, 6.0, 7.0, 8.0, 9.0, 8.0, 9.0, 6.0],
]


def test_mmcv_quadri_vectors():
    # mmcv tests/test_ops/test_box_iou_quadri.py: its CPU and CUDA expectations differ
    # in two entries ([0, 1]: 1.0 vs 1.2222, exact 7/9; [1, 0]: 0.0 vs 0.1570, exact 0),
    # so mmops matches the exact reference, and mmcv where its two kernels agree.
    q1, q2 = torch.tensor(MMCV_Q1), torch.tensor(MMCV_Q2)
    iou = mmops.box_iou_quadri(q1, q2)
    torch.testing.assert_close(iou.double(), quadri_ref(q1, q2), rtol=0, atol=1e-6)
    for (i, j), v in {(0, 0): 0.0714, (1, 1): 0.5, (2, 2): 0.5, (0, 2): 0.0, (2, 0): 0.0, (0, 1): 7 / 9}.items():
        assert abs(iou[i, j].item() - v) < 1e-4
    iof = mmops.box_iou_quadri(q1, q2, "iof")
    for (i, j), v in {(0, 0): 0.1111, (1, 1): 1.0, (2, 2): 1.0}.items():
        assert abs(iof[i, j].item() - v) < 1e-4
    torch.testing.assert_close(mmops.box_iou_quadri(q1, q2, aligned=True), iou.diagonal())


# ----------------------------------------------------------------------------- edge cases


def _pair(a, b, dtype=torch.float64, op=rot_op, **kw):
    return op(torch.tensor([a], dtype=dtype), torch.tensor([b], dtype=dtype), **kw)[0, 0].item()


def _exact(a, b, iof=False):
    return rotated_overlap(a, b, iof)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("theta", [0.0, 0.3, -1.2, PI / 2, -PI / 2, PI, 2 * PI, -3 * PI, 1e3])
def test_identical_boxes_iou_exactly_one(dtype, theta):
    box = [3.7, -2.1, 5.3, 0.9, theta]
    assert _pair(box, box, dtype) == 1.0
    assert _pair(box, box, dtype, mode="iof") == 1.0
    q = corners(torch.tensor([box], dtype=torch.float64)).to(dtype)
    assert quad_op(q, q)[0, 0].item() == 1.0


EDGE_PAIRS = {
    "inside": ([0, 0, 10, 6, 0.4], [0.5, 0.2, 2, 1, 1.1]),
    "shared_edge": ([0, 0, 2, 2, 0], [2, 0, 2, 2, 0]),
    "shared_edge_rotated": ([0, 0, 2, 2, 0.7], [2 * math.cos(0.7), 2 * math.sin(0.7), 2, 2, 0.7]),
    "collinear_overlap": ([0, 0, 4, 2, 0], [1, 0, 4, 2, 0]),
    "same_centre_quarter_turn": ([0, 0, 4, 2, 0], [0, 0, 4, 2, PI / 2]),
    "touching_corners": ([0, 0, 2, 2, 0], [2, 2, 2, 2, 0]),
    "touching_corner_diamond": ([0, 0, 2, 2, 0], [1 + math.sqrt(2), 0, 2, 2, PI / 4]),
    "near_parallel": ([0, 0, 10, 1, 0], [0.1, 0.05, 10, 1, 1e-7]),
    "near_parallel_f": ([0, 0, 10, 1, 1e-4], [0, 0.3, 10, 1, 1.1e-4]),
    "thin": ([0, 0, 5, 1e-3, 0.2], [0.1, 0, 5, 1e-3, 0.21]),
    "thin_cross": ([0, 0, 5, 1e-3, 0], [0, 0, 5, 1e-3, PI / 2]),
    "half_turn": ([1, 2, 3, 4, 0.3], [1, 2, 3, 4, 0.3 + PI]),
    "huge_coordinates": ([1e4, -1e4, 1, 2, 0.3], [1e4 + 0.25, -1e4 + 0.1, 1.5, 1, -0.4]),
    "huge_identical_rotated": ([12345.6, 9876.5, 1.3, 0.7, 0.9], [12345.6, 9876.5, 1.3, 0.7, 0.9 + 2 * PI]),
    "disjoint": ([0, 0, 1, 1, 0], [5, 5, 1, 1, 0.5]),
}


@pytest.mark.parametrize("name", sorted(EDGE_PAIRS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", ["iou", "iof"])
def test_edge_pairs(name, dtype, mode):
    a, b = EDGE_PAIRS[name]
    # The exact overlap of the values the op sees.
    a_seen = torch.tensor(a, dtype=dtype).double().tolist()
    b_seen = torch.tensor(b, dtype=dtype).double().tolist()
    exp = _exact(a_seen, b_seen, mode == "iof")
    got = _pair(a, b, dtype, mode=mode)
    tol = 1e-9 if dtype == torch.float64 else (2e-3 if name.startswith("huge") else 1e-5)
    assert abs(got - exp) <= tol, (got, exp)
    assert 0.0 <= got <= 1.0


def test_edge_values():
    assert _pair(*EDGE_PAIRS["shared_edge"]) == 0.0
    assert _pair(*EDGE_PAIRS["touching_corners"]) == 0.0
    assert _pair(*EDGE_PAIRS["disjoint"]) == 0.0
    assert abs(_pair(*EDGE_PAIRS["collinear_overlap"]) - 0.6) < 1e-12
    assert abs(_pair(*EDGE_PAIRS["same_centre_quarter_turn"]) - 1 / 3) < 1e-12
    assert abs(_pair(*EDGE_PAIRS["inside"], mode="iof")) <= 1.0
    inner, outer = [0.5, 0.2, 2, 1, 1.1], [0, 0, 10, 6, 0.4]
    assert abs(_pair(inner, outer, mode="iof") - 1.0) < 1e-12  # inside: iof 1
    assert abs(_pair(inner, outer) - 2 / 60) < 1e-12
    assert abs(_pair(*EDGE_PAIRS["half_turn"]) - 1.0) < 1e-12


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_degenerate_and_non_finite_give_zero(dtype):
    good = [0, 0, 2, 2, 0.1]
    nan, inf = float("nan"), float("inf")
    for bad in ([0, 0, 0, 2, 0], [0, 0, 2, 0, 0], [0, 0, -2, 2, 0], [nan, 0, 2, 2, 0], [0, 0, 2, 2, nan],
                [inf, 0, 2, 2, 0], [0, 0, inf, inf, 0], [0, 0, 2, 2, inf]):  # fmt: skip
        for mode in ("iou", "iof"):
            assert _pair(good, bad, dtype, mode=mode) == 0.0
            assert _pair(bad, good, dtype, mode=mode) == 0.0
            assert _pair(bad, bad, dtype, mode=mode) == 0.0
    q = [0, 0, 2, 0, 2, 2, 0, 2]
    for bad in ([0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 2, 0, 2, nan, 0, 2], [0, 0, 2, 0, inf, 2, 0, 2]):
        assert _pair(q, bad, dtype, op=quad_op) == 0.0
        assert _pair(bad, q, dtype, op=quad_op) == 0.0


def test_quadri_orientation_does_not_matter():
    q1 = random_quadri(6, seed=3, dtype=torch.float64)
    q2 = random_quadri(5, seed=4, dtype=torch.float64)
    rev = q2.reshape(5, 4, 2).flip(1).reshape(5, 8)
    torch.testing.assert_close(quad_op(q1, rev), quad_op(q1, q2), rtol=1e-12, atol=1e-14)
    rolled = q2.reshape(5, 4, 2).roll(1, 1).reshape(5, 8)
    torch.testing.assert_close(quad_op(q1, rolled), quad_op(q1, q2), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_matches_float32_of_same_values(dtype):
    b1 = random_rotated(20, seed=11, dtype=dtype)
    b2 = random_rotated(17, seed=12, dtype=dtype)
    out = rot_op(b1, b2)
    assert out.dtype == dtype
    exp = rot_op(b1.float(), b2.float()).to(dtype)
    torch.testing.assert_close(out, exp, rtol=0, atol=0)


def test_strides_and_symmetry():
    big = random_rotated(30, seed=13, dtype=torch.float64)
    b1, b2 = big[::2], big[1::3]
    assert not b1.is_contiguous()
    exp = rot_op(b1.contiguous(), b2.contiguous())
    torch.testing.assert_close(rot_op(b1, b2), exp, rtol=0, atol=0)
    torch.testing.assert_close(rot_op(b2, b1), exp.t(), rtol=1e-12, atol=1e-14)
    q = corners(big).t().contiguous().t()
    torch.testing.assert_close(quad_op(q[::2], q[1::3]), quad_op(q[::2].contiguous(), q[1::3].contiguous()))


def test_not_differentiable():
    b1 = random_rotated(3, seed=1, dtype=torch.float64).requires_grad_(True)
    out = rot_op(b1, b1.detach())
    with pytest.raises(RuntimeError, match="not implemented|does not require grad"):
        out.sum().backward()


def test_autocast_runs_in_float32():
    b1 = random_rotated(4, seed=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = mmops.box_iou_rotated(b1, b1.to(torch.bfloat16))
    assert out.dtype == torch.float32


# ----------------------------------------------------------------------------- mmcv.ops bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine")
    pytest.importorskip("mmcv")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops")
    b1, b2 = random_rotated(8, seed=21), random_rotated(6, seed=22)
    for mode in ("iou", "iof"):
        for aligned, other in ((False, b2), (True, b2[:6].repeat(2, 1)[:8])):
            for cw in (True, False):
                got = ops.box_iou_rotated(b1, other, mode, aligned, cw)
                torch.testing.assert_close(got, mmops.box_iou_rotated(b1, other, mode, aligned, cw), rtol=0, atol=0)
        q1, q2 = random_quadri(5, seed=1), random_quadri(4, seed=2)
        torch.testing.assert_close(ops.box_iou_quadri(q1, q2, mode), mmops.box_iou_quadri(q1, q2, mode))
    exp = torch.tensor(MMCV_IOU)
    torch.testing.assert_close(
        ops.box_iou_rotated(torch.tensor(MMCV_B1), torch.tensor(MMCV_B2)), exp, rtol=0, atol=1e-4
    )


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_large_matches_cpu(dtype):
    # many column blocks and more row tiles than one grid row (n > 32 * 65535 is not
    # tested: too slow on CPU); clustered boxes exercise the clip, uniform the reject
    b1 = random_rotated(700, image=200.0, side=20.0, seed=1, dtype=dtype)
    b2 = random_rotated(900, image=200.0, side=20.0, seed=2, dtype=dtype)
    exp = rot_op(b1, b2)
    got = rot_op(b1.cuda(), b2.cuda()).cpu()
    torch.testing.assert_close(got, exp, **_cuda_tol(dtype, "", None, None))
    got_aligned = rot_op(b1.cuda(), b1.flip(0).cuda(), "iof", True).cpu()
    torch.testing.assert_close(got_aligned, rot_op(b1, b1.flip(0), "iof", True), **_cuda_tol(dtype, "", None, None))


@pytest.mark.cuda
def test_cuda_edge_cases():
    for name, (a, b) in EDGE_PAIRS.items():
        for dtype in (torch.float32, torch.float64):
            cpu = _pair(a, b, dtype)
            gpu = rot_op(torch.tensor([a], dtype=dtype).cuda(), torch.tensor([b], dtype=dtype).cuda())[0, 0].item()
            assert abs(cpu - gpu) < (1e-9 if dtype == torch.float64 else 1e-4), name
    box = torch.tensor([[3.7, -2.1, 5.3, 0.9, 0.3]], device="cuda")
    assert rot_op(box, box).item() == 1.0
    nan = torch.tensor([[float("nan"), 0, 1, 1, 0]], device="cuda")
    assert rot_op(nan, box).item() == 0.0
