"""mmops nms_rotated and nms_quadri: the conformance cases, then a float64 greedy
reference on exact overlaps (polygon_reference.py), mmcv's published vectors,
labels, ties / NaN / Inf, the wrappers, batched_nms with rotated boxes, the
mmcv.ops bridge and CUDA."""

import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from polygon_reference import quadri_overlap, rotated_overlap
from test_box_iou_rotated import corners

import mmops

rot_op = torch.ops.mmops.nms_rotated
quad_op = torch.ops.mmops.nms_quadri

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


# ----------------------------------------------------------------------------- references and inputs


def score_order_ref(scores):
    s = scores.detach().double().cpu().tolist()
    return sorted(range(len(s)), key=lambda i: (math.isnan(s[i]), 0.0 if math.isnan(s[i]) else -s[i], i))


def overlaps_ref(boxes, clockwise=True):
    b = boxes.detach().double().cpu().tolist()
    if boxes.shape[1] == 8:
        return [[quadri_overlap(x, y) for y in b] for x in b]
    if not clockwise:
        b = [r[:4] + [-r[4]] for r in b]
    return [[rotated_overlap(x, y) for y in b] for x in b]


def nms_ref(boxes, scores, thr, labels=None, clockwise=True, iou=None):
    iou = overlaps_ref(boxes, clockwise) if iou is None else iou
    lab = None if labels is None else labels.double().tolist()
    order = score_order_ref(scores)
    removed = [False] * len(order)
    keep = []
    for pos, i in enumerate(order):
        if removed[i]:
            continue
        keep.append(i)
        for j in order[pos + 1 :]:
            if (lab is None or lab[i] == lab[j]) and iou[i][j] > thr:
                removed[j] = True
    return torch.tensor(keep, dtype=torch.long)


def clustered(n, *, objects=6, image=60.0, seed=0, dtype=torch.float32, device="cpu"):
    """Detector-like: jittered copies of a few rotated objects, random scores."""
    g = torch.Generator().manual_seed(seed)
    obj = torch.cat(
        [
            torch.rand(objects, 2, generator=g, dtype=torch.float64) * image,
            torch.rand(objects, 2, generator=g, dtype=torch.float64) * 10 + 2,
            (torch.rand(objects, 1, generator=g, dtype=torch.float64) * 2 - 1) * math.pi,
        ],
        1,
    )
    pick = torch.randint(0, objects, (n,), generator=g)
    jitter = torch.randn(n, 5, generator=g, dtype=torch.float64) * torch.tensor([1.0, 1.0, 0.8, 0.8, 0.15])
    boxes = obj[pick] + jitter
    boxes[:, 2:4] = boxes[:, 2:4].abs() + 0.2
    scores = torch.rand(n, generator=g, dtype=torch.float64)
    return boxes.to(dtype=dtype, device=device), scores.to(dtype=dtype, device=device)


def safe_threshold(iou, candidates, margin=1e-5):
    """A threshold of `candidates` with no off-diagonal IoU within margin of it."""
    values = [v for i, row in enumerate(iou) for j, v in enumerate(row) if i != j]
    for thr in candidates:
        if all(abs(v - thr) > margin for v in values):
            return thr
    raise AssertionError("no safe threshold")


# ----------------------------------------------------------------------------- conformance


def _sample(thr, with_labels, clockwise=True, quadri=False):
    def sample(device, dtype, size):
        n = 40 if size == 0 else 70
        boxes, scores = clustered(n, seed=3 + size, dtype=dtype, device=device)
        labels = torch.randint(0, 3, (n,), generator=torch.Generator().manual_seed(size)).to(device)
        labels = labels if with_labels else None
        if quadri:
            return Sample((corners(boxes).to(dtype), scores, thr, labels))
        return Sample((boxes, scores, thr, labels, clockwise))

    return sample


def _empty(cols, extra):
    def empty(device, dtype):
        boxes, scores = torch.zeros(0, cols, dtype=dtype, device=device), torch.zeros(0, dtype=dtype, device=device)
        # tensors of extra (empty labels) on the requested device too
        args = [e.to(device) if isinstance(e, torch.Tensor) else e for e in extra]
        return [Sample((boxes, scores, *args), out_shapes=[(0,)])]

    return empty


def _nonzero_ious(boxes, quadri):
    b = boxes.double()
    iou = torch.ops.mmops.box_iou_quadri(b, b) if quadri else torch.ops.mmops.box_iou_rotated(b, b)
    return iou[iou != 0]


def _away_from_ious(iou, candidates, margin=1e-5):
    """The first threshold of candidates with no (nonzero) IoU within margin: an IoU an ulp
    apart on the two devices (their sin/cos, FMA) then cannot flip a decision."""
    for thr in candidates:
        if not bool(((iou - thr).abs() < margin).any()):
            return thr
    raise AssertionError("no threshold away from the IoUs")


def _cuda_samples(quadri, with_labels):
    """Tiles of 64 boxes (63, 64, 65) and many tiles (1000, 3000)."""

    def samples(dtype):
        for n in (1, 63, 64, 65, 1000, 3000):
            boxes, scores = clustered(n, objects=max(1, n // 20), image=300.0, seed=n, dtype=dtype)
            labels = torch.randint(0, 4, (n,), generator=torch.Generator().manual_seed(n)) if with_labels else None
            iou = _nonzero_ious(corners(boxes).to(dtype) if quadri else boxes, quadri)
            for base in (-0.1, 0.0, 0.3, 0.7):
                # 0 as is: a touching pair's IoU is exactly 0 on both devices (polygon.h
                # rounds each product, no FMA; test_touching_quads_overlap_zero)
                thr = base if base <= 0 else _away_from_ious(iou, [base + 1e-4 * k for k in range(50)])
                if quadri:
                    yield Sample((corners(boxes).to(dtype), scores, thr, labels))
                else:
                    yield Sample((boxes, scores, thr, labels, True))

    return samples


class _PostRotated(torch.nn.Module):
    """The op (its unbacked size used further on) and the mmcv-style wrapper."""

    def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
        keep = torch.ops.mmops.nms_rotated(boxes * 1.0, scores, 0.3, None, True)
        dets, keep2 = mmops.nms_rotated(boxes, scores, 0.5)
        return boxes[keep].sum(1) + 1, dets, keep2


class _PostQuadri(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor, labels: torch.Tensor):
        keep = torch.ops.mmops.nms_quadri(boxes, scores, 0.5, labels)
        dets, keep2 = mmops.nms_quadri(boxes, scores, 0.3, labels)
        return scores[keep] * 2, dets, keep2


_Z = torch.zeros
BAD = {
    "boxes_4_cols": BadInput(
        lambda *_: (_Z(3, 4), _Z(3), 0.5, None, True), r"boxes to be a 2-D tensor of shape \[N, 5\]", meta=True
    ),
    "scores_length": BadInput(
        lambda *_: (_Z(3, 5), _Z(4), 0.5, None, True),
        r"scores to be a 1-D tensor of shape \[N\] with N = boxes.size\(0\) = 3",
    ),
    "boxes_long": BadInput(
        lambda *_: (_Z(3, 5, dtype=torch.long), _Z(3), 0.5, None, True), "boxes to have a floating point dtype"
    ),
    "scores_int": BadInput(
        lambda *_: (_Z(3, 5), _Z(3, dtype=torch.int32), 0.5, None, True), "scores to have a floating point dtype"
    ),
    "threshold_nan": BadInput(lambda *_: (_Z(3, 5), _Z(3), float("nan"), None, True), "iou_threshold must be a number"),
    "labels_length": BadInput(
        lambda *_: (_Z(3, 5), _Z(3), 0.5, _Z(2, dtype=torch.long), True), r"labels to be a 1-D tensor of shape \[N\]"
    ),
    "labels_bool": BadInput(
        lambda *_: (_Z(3, 5), _Z(3), 0.5, _Z(3, dtype=torch.bool), True),
        "labels to have an integer or floating point dtype, but got Bool",
    ),
    "scores_on_cpu": BadInput(
        lambda *_: (_Z(3, 5, device="cuda"), _Z(3), 0.5, None, True), "scores on the device of boxes", cuda=True
    ),
    "labels_on_cpu": BadInput(
        lambda *_: (_Z(3, 5, device="cuda"), _Z(3, device="cuda"), 0.5, _Z(3, dtype=torch.long), True),
        "labels on the device of boxes",
        cuda=True,
    ),
}
QUAD_BAD = {
    "boxes_5_cols": BadInput(lambda *_: (_Z(3, 5), _Z(3), 0.5, None), r"boxes to be a 2-D tensor of shape \[N, 8\]"),
    "labels_length": BadInput(
        lambda *_: (_Z(3, 8), _Z(3), 0.5, _Z(4)), r"mmops::nms_quadri: expected labels to be a 1-D tensor"
    ),
}

CONFORMANCE = [
    ConformanceCase(
        "nms_rotated",
        rot_op,
        _sample(0.3, False),
        dtypes=DTYPES,
        data_dependent=True,
        empty=_empty(5, (0.5, None, True)),
        cuda_samples=_cuda_samples(False, False),
        bad_inputs=BAD,
        module=_PostRotated,
    ),
    ConformanceCase(
        "nms_rotated_labels_ccw",
        rot_op,
        _sample(0.3, True, clockwise=False),
        dtypes=DTYPES,
        data_dependent=True,
        empty=_empty(5, (0.5, torch.zeros(0, dtype=torch.long), False)),
        cuda_samples=_cuda_samples(False, True),
    ),
    ConformanceCase(
        "nms_quadri",
        quad_op,
        _sample(0.3, False, quadri=True),
        dtypes=DTYPES,
        data_dependent=True,
        empty=_empty(8, (0.5, None)),
        cuda_samples=_cuda_samples(True, False),
        bad_inputs=QUAD_BAD,
    ),
    ConformanceCase(
        "nms_quadri_labels",
        quad_op,
        _sample(0.5, True, quadri=True),
        dtypes=DTYPES,
        data_dependent=True,
        cuda_samples=_cuda_samples(True, True),
        module=_PostQuadri,
    ),
]


class TestNmsRotatedConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("with_labels", [False, True])
@pytest.mark.parametrize("clockwise", [True, False])
def test_against_float64_greedy_reference(dtype, with_labels, clockwise):
    boxes, scores = clustered(60, seed=7, dtype=dtype)
    labels = torch.randint(0, 3, (60,), generator=torch.Generator().manual_seed(1)) if with_labels else None
    iou = overlaps_ref(boxes, clockwise)
    for thr in (0.1, 0.3, 0.5, 0.7):
        thr = safe_threshold(iou, [thr, thr + 0.0123, thr - 0.0071])
        exp = nms_ref(boxes, scores, thr, labels, clockwise, iou=iou)
        assert 1 < len(exp) < 60
        torch.testing.assert_close(rot_op(boxes, scores, thr, labels, clockwise), exp, rtol=0, atol=0)


@pytest.mark.parametrize("with_labels", [False, True])
def test_quadri_against_reference(with_labels):
    boxes, scores = clustered(50, seed=8, dtype=torch.float64)
    q = corners(boxes)
    q[::3] = q[::3].reshape(-1, 4, 2).flip(1).reshape(-1, 8)  # some clockwise
    labels = torch.randint(0, 2, (50,), generator=torch.Generator().manual_seed(2)).float() if with_labels else None
    iou = overlaps_ref(q)
    thr = safe_threshold(iou, [0.3, 0.31, 0.29])
    exp = nms_ref(q, scores, thr, labels, iou=iou)
    torch.testing.assert_close(quad_op(q, scores, thr, labels), exp, rtol=0, atol=0)
    # the same boxes as rotated boxes
    torch.testing.assert_close(rot_op(boxes, scores, thr, labels), exp, rtol=0, atol=0)


MMCV_BOXES = [[6.0, 3.0, 8.0, 7.0, 0.5, 0.7], [3.0, 6.0, 9.0, 11.0, 0.6, 0.8],
              [3.0, 7.0, 10.0, 12.0, 0.3, 0.5], [1.0, 4.0, 13.0, 7.0, 0.6, 0.9]]  # fmt: skip
MMCV_QUADS = [[1.0, 1.0, 3.0, 4.0, 4.0, 4.0, 4.0, 1.0, 0.7], [2.0, 2.0, 3.0, 4.0, 4.0, 2.0, 3.0, 1.0, 0.8],
              [7.0, 7.0, 8.0, 8.0, 9.0, 7.0, 8.0, 6.0, 0.5], [0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0, 0.0, 0.9]]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_labels", [False, True])
def test_mmcv_vectors(dtype, with_labels):
    # mmcv tests/test_ops/test_nms_rotated.py and test_nms_quadri.py (float labels, as there).
    # mmcv's labelled vectors equal its unlabelled ones (its CPU kernel ignores labels);
    # mmops' labels separate classes, which gives mmcv's class-aware batched_nms vector
    # (test_nms_quadri.py::test_batched_nms: [3, 1, 0, 2]).
    b = torch.tensor(MMCV_BOXES, dtype=dtype)
    labels = torch.tensor([1, 0, 1, 0], dtype=torch.float32) if with_labels else None
    expected = [3, 1, 0, 2] if with_labels else [3, 1, 0]
    dets, keep = mmops.nms_rotated(b[:, :5], b[:, 5], 0.5, labels)
    assert keep.tolist() == expected
    assert dets.shape == (len(expected), 6) and dets.dtype == dtype
    torch.testing.assert_close(dets, b[expected])
    q = torch.tensor(MMCV_QUADS, dtype=dtype)
    expected = [3, 1, 0, 2] if with_labels else [3, 1, 2]
    dets, keep = mmops.nms_quadri(q[:, :8], q[:, 8], 0.3, labels)
    assert keep.tolist() == expected
    assert dets.shape == (len(expected), 9)
    torch.testing.assert_close(dets, q[expected])


def test_batched_nms_rotated_and_quadri():
    # mmcv tests/test_ops/test_nms_quadri.py::test_batched_nms
    q = torch.tensor(MMCV_QUADS)
    labels = torch.tensor([1, 0, 1, 0], dtype=torch.float32)
    cfg = dict(type="nms_quadri", iou_threshold=0.3)
    dets, keep = mmops.batched_nms(q[:, :8], q[:, 8], labels, cfg, class_agnostic=True)
    assert keep.tolist() == [3, 1, 2]
    dets, keep = mmops.batched_nms(q[:, :8], q[:, 8], labels, cfg)
    assert keep.tolist() == [3, 1, 0, 2]
    torch.testing.assert_close(dets, q[[3, 1, 0, 2]])
    boxes, scores = clustered(80, seed=9)
    idxs = torch.randint(0, 4, (80,), generator=torch.Generator().manual_seed(3))
    for cfg in (dict(type="nms_rotated", iou_threshold=0.35), dict(type="nms_rotated", iou_thr=0.35, max_num=5)):
        dets, keep = mmops.batched_nms(boxes, scores, idxs, cfg)
        exp = rot_op(boxes, scores, 0.35, idxs)[: cfg.get("max_num", 100)]
        assert keep.tolist() == exp.tolist()
        torch.testing.assert_close(dets, torch.cat([boxes[exp], scores[exp, None]], 1))
    # per category == all at once
    per = []
    for c in range(4):
        members = torch.nonzero(idxs == c).squeeze(1)
        per += members[rot_op(boxes[members], scores[members], 0.35)].tolist()
    per.sort(key=lambda i: -scores[i].item())
    assert mmops.batched_nms(boxes, scores, idxs, dict(type="nms_rotated", iou_threshold=0.35))[1].tolist() == per
    with pytest.raises(ValueError, match="unknown nms_cfg keys"):
        mmops.batched_nms(boxes, scores, idxs, dict(type="nms_rotated", iou_threshold=0.3, offset=1))


def test_ties_nan_inf_and_degenerate():
    base = [[0, 0, 4, 2, 0.3]] * 4 + [[20, 20, 2, 2, 0]]
    boxes = torch.tensor(base, dtype=torch.float64)
    # equal scores: lower index first, the others suppressed
    assert rot_op(boxes, torch.tensor([0.5, 0.5, 0.5, 0.5, 0.1]), 0.5).tolist() == [0, 4]
    # NaN score: after every number; it is still kept when nothing suppresses it
    scores = torch.tensor([0.2, float("nan"), 0.9, 0.3, float("nan")])
    assert rot_op(boxes, scores, 0.5).tolist() == [2, 4]
    # a box with a NaN / Inf value overlaps nothing: kept by its score, suppresses nothing
    bad = boxes.clone()
    bad[0, 0] = float("nan")
    bad[1, 2] = float("inf")
    s = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
    assert rot_op(bad, s, 0.5).tolist() == [0, 1, 2, 4]
    # w = 0: IoU 0 with everything
    zero = boxes.clone()
    zero[2, 2] = 0
    assert rot_op(zero, s, 0.5).tolist() == [0, 2, 4]
    # threshold < 0: every later box is suppressed (IoU 0 > thr), even disjoint ones
    assert rot_op(boxes, s, -0.1).tolist() == [0]
    # threshold 1: nothing is (IoU is never > 1)
    assert rot_op(boxes, s, 1.0).tolist() == [0, 1, 2, 3, 4]


def test_wrappers_empty_and_strides():
    dets, keep = mmops.nms_rotated(torch.zeros(0, 5), torch.zeros(0), 0.5)
    assert dets.shape == (0, 6) and keep.shape == (0,) and keep.dtype == torch.long
    dets, keep = mmops.nms_quadri(torch.zeros(0, 8), torch.zeros(0), 0.5)
    assert dets.shape == (0, 9)
    boxes, scores = clustered(40, seed=10, dtype=torch.float64)
    wide = torch.cat([boxes, boxes], 1)[:, ::2]  # strided columns
    exp = rot_op(wide.contiguous(), scores, 0.3)
    assert rot_op(wide, scores, 0.3).tolist() == exp.tolist()
    long_labels = torch.randint(0, 3, (40,), generator=torch.Generator().manual_seed(4))
    for lab in (long_labels, long_labels.int(), long_labels.double(), long_labels.to(torch.uint8)):
        assert rot_op(boxes, scores, 0.3, lab).tolist() == rot_op(boxes, scores, 0.3, long_labels).tolist()


def test_low_precision_uses_the_rounded_values():
    boxes, scores = clustered(50, seed=12, dtype=torch.float64)
    for dtype in (torch.float16, torch.bfloat16):
        b, s = boxes.to(dtype), scores.to(dtype)
        assert rot_op(b, s, 0.3).tolist() == rot_op(b.float(), s.float(), 0.3).tolist()


def test_fake_kernel_and_compile():
    boxes, scores = clustered(30, seed=13)

    def f(b, s):
        keep = torch.ops.mmops.nms_rotated(b, s, 0.3, None, True)
        return b[keep].sum(1) + s[keep]

    torch.testing.assert_close(torch.compile(f, fullgraph=True)(boxes, scores), f(boxes, scores))


# ----------------------------------------------------------------------------- mmcv.ops bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine")
    pytest.importorskip("mmcv")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops")
    boxes, scores = clustered(60, seed=14)
    labels = torch.randint(0, 3, (60,), generator=torch.Generator().manual_seed(5))
    for lab in (None, labels):
        for cw in (True, False):
            dets, keep = ops.nms_rotated(boxes, scores, 0.3, lab, cw)
            exp_dets, exp_keep = mmops.nms_rotated(boxes, scores, 0.3, lab, cw)
            assert keep.tolist() == exp_keep.tolist()
            torch.testing.assert_close(dets, exp_dets)
        q = corners(boxes).float()
        dets, keep = ops.nms_quadri(q, scores, 0.3, None if lab is None else lab.float())
        assert keep.tolist() == mmops.nms_quadri(q, scores, 0.3, lab)[1].tolist()
    cfg = dict(type="nms_rotated", iou_threshold=0.3)
    dets, keep = ops.batched_nms(boxes, scores, labels, cfg)
    assert sorted(keep.tolist()) == sorted(mmops.batched_nms(boxes, scores, labels, cfg)[1].tolist())
    b = torch.tensor(MMCV_BOXES)
    assert ops.nms_rotated(b[:, :5], b[:, 5], 0.5)[1].tolist() == [3, 1, 0]
    q = torch.tensor(MMCV_QUADS)
    assert ops.nms_quadri(q[:, :8], q[:, 8], 0.3)[1].tolist() == [3, 1, 2]


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("quadri", [False, True])
def test_cuda_matches_cpu_many_tiles(dtype, quadri):
    boxes, scores = clustered(5000, objects=200, image=1000.0, seed=1, dtype=dtype)
    labels = torch.randint(0, 5, (5000,), generator=torch.Generator().manual_seed(1))
    b = corners(boxes).to(dtype) if quadri else boxes
    op = quad_op if quadri else rot_op
    extra = () if quadri else (True,)
    for lab in (None, labels):
        for thr in (0.0, 0.3, 0.6):
            exp = op(b, scores, thr, lab, *extra)
            got = op(b.cuda(), scores.cuda(), thr, None if lab is None else lab.cuda(), *extra).cpu()
            # float32: an IoU within an ulp of thr may flip between the devices' sin/cos
            if dtype == torch.float64:
                assert got.tolist() == exp.tolist()
            else:
                assert len(set(got.tolist()) ^ set(exp.tolist())) <= max(2, len(exp) // 500)


# bf16 sample quads where a vertex lies on the other quad's edge (exact IoU 0): an
# FMA-contracted clip point gave IoU ~1e-16 > 0 on CUDA, one box fewer kept at thr 0.
TOUCHING = [
    [154, 270, 154, 274, 144, 274, 144, 270],
    [288, 249, 300, 249, 300, 260, 288, 258],
    [152, 282, 148, 276, 150, 274, 154, 280],
    [294, 246, 298, 245, 298, 248, 294, 249],
]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_touching_quads_overlap_zero(device, dtype):
    q = torch.tensor(TOUCHING, dtype=dtype, device=device)
    iou = torch.ops.mmops.box_iou_quadri(q, q).cpu()
    assert iou[0, 2].item() == 0 and iou[2, 0].item() == 0 and iou[1, 3].item() == 0 and iou[3, 1].item() == 0
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6], dtype=dtype, device=device)
    assert quad_op(q, scores, 0.0).tolist() == [0, 1, 2, 3]


@pytest.mark.cuda
def test_cuda_ties_nan_and_empty():
    boxes = torch.tensor([[0, 0, 4, 2, 0.3]] * 4 + [[20, 20, 2, 2, 0]], device="cuda")
    scores = torch.tensor([0.2, float("nan"), 0.9, 0.3, float("nan")], device="cuda")
    assert rot_op(boxes, scores, 0.5).tolist() == [2, 4]
    assert rot_op(boxes[:0], scores[:0], 0.5).shape == (0,)
    q = torch.tensor(MMCV_QUADS, device="cuda")
    assert quad_op(q[:, :8], q[:, 8], 0.3).tolist() == [3, 1, 2]
