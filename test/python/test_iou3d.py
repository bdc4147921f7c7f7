"""mmops boxes_overlap_bev, boxes_iou_bev, nms_bev and nms_normal_bev (mmcv 2.x's
iou3d, bird's-eye view): the conformance cases, then exact Fraction references
(polygon_reference.py), mmcv's published vectors, the box formats and the angle
direction, degenerate geometry (identical and touching boxes), ties / NaN / Inf,
pre_max_size / post_max_size, low precision, strides, the mmcv.ops bridge and CUDA."""

import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from iou3d_reference import aligned_iou_ref, area_ref, overlaps_ref
from test_box_iou_rotated import _cuda_tol as rotated_cuda_tol
from test_nms_rotated import _away_from_ious, clustered, nms_ref, safe_threshold, score_order_ref

import mmops

overlap_op = torch.ops.mmops.boxes_overlap_bev
iou_op = torch.ops.mmops.boxes_iou_bev
nms_op = torch.ops.mmops.nms_bev
normal_op = torch.ops.mmops.nms_normal_bev

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
PI = math.pi


# ----------------------------------------------------------------------------- references and inputs


def random_boxes7(n, *, image=20.0, seed=0, dtype=torch.float32, device="cpu"):
    """[N, 7] (x, y, z, dx, dy, dz, heading), sides in [0.5, 8.5]."""
    g = torch.Generator().manual_seed(seed)
    xyz = torch.rand(n, 3, generator=g, dtype=torch.float64) * image
    size = torch.rand(n, 3, generator=g, dtype=torch.float64) * 8 + 0.5
    heading = (torch.rand(n, 1, generator=g, dtype=torch.float64) * 2 - 1) * PI
    return torch.cat([xyz, size, heading], 1).to(dtype=dtype, device=device)


def to_xyxyr(rotated):
    """[N, 5] (x1, y1, x2, y2, ry) of [N, 5] (cx, cy, w, h, ry) boxes (float64)."""
    b = rotated.double()
    half = b[:, 2:4] / 2
    return torch.cat([b[:, :2] - half, b[:, :2] + half, b[:, 4:]], 1)


def random_xyxyr(n, *, image=20.0, seed=0, dtype=torch.float32, device="cpu"):
    b = random_boxes7(n, image=image, seed=seed, dtype=torch.float64)
    return to_xyxyr(b[:, [0, 1, 3, 4, 6]]).to(dtype=dtype, device=device)


def clustered_xyxyr(n, *, seed=0, dtype=torch.float32, device="cpu", **kw):
    """Detector-like [N, 5] (x1, y1, x2, y2, ry) boxes: jittered copies of a few objects."""
    boxes, scores = clustered(n, seed=seed, dtype=torch.float64, **kw)
    return to_xyxyr(boxes).to(dtype=dtype, device=device), scores.to(dtype=dtype, device=device)


def nms_bev_ref(boxes, scores, thr, pre_max_size=None, post_max_size=None):
    """Greedy NMS on the exact IoU (float64) of the best pre_max_size boxes, cut to post_max_size."""
    order = score_order_ref(scores)[:pre_max_size]
    iou = overlaps_ref(boxes[order], boxes[order], iou=True).tolist()
    keep = [order[k] for k in nms_ref(boxes[order], scores[order], thr, iou=iou).tolist()]
    return torch.tensor(keep[:post_max_size], dtype=torch.long)


# ----------------------------------------------------------------------------- conformance


def _pairs_sample(make):
    def sample(device, dtype, size):
        n, m = (6, 9) if size == 0 else (11, 13)  # never 5 or 7 (a column count): no duck-sized guard
        return Sample(
            (make(n, seed=1 + size, dtype=dtype, device=device), make(m, seed=2 + size, dtype=dtype, device=device))
        )

    return sample


def _pairs_empty(cols):
    def empty(device, dtype):
        z = lambda k: torch.zeros(k, cols, dtype=dtype, device=device)  # noqa: E731
        return [
            Sample((z(0), z(3)), out_shapes=[(0, 3)]),
            Sample((z(3), z(0)), out_shapes=[(3, 0)]),
            Sample((z(0), z(0)), out_shapes=[(0, 0)]),
        ]

    return empty


def _pairs_cuda_samples(make):
    def samples(dtype):
        for n, m in ((1, 1), (31, 33), (257, 300), (100, 1000)):
            yield Sample((make(n, image=60.0, seed=n, dtype=dtype), make(m, image=60.0, seed=m + 7, dtype=dtype)))

    return samples


def _nms_sample(thr, pre, post, normal=False):
    def sample(device, dtype, size):
        boxes, scores = clustered_xyxyr(40 if size == 0 else 70, seed=3 + size, dtype=dtype, device=device)
        return Sample((boxes, scores, thr) if normal else (boxes, scores, thr, pre, post))

    return sample


def _nms_empty(extra):
    def empty(device, dtype):
        boxes, scores = torch.zeros(0, 5, dtype=dtype, device=device), torch.zeros(0, dtype=dtype, device=device)
        return [Sample((boxes, scores, *extra), out_shapes=[(0,)])]

    return empty


def _nms_cuda_samples(pre, post, normal=False):
    """Tiles of 64 boxes (63, 64, 65) and many tiles (1000, 3000); thresholds away from the
    IoUs (an IoU an ulp apart on the two devices cannot flip a decision)."""

    def samples(dtype):
        for n in (1, 63, 64, 65, 1000, 3000):
            boxes, scores = clustered_xyxyr(n, objects=max(1, n // 20), image=300.0, seed=n, dtype=dtype)
            iou = aligned_iou_ref(boxes) if normal else iou_op(boxes.double(), boxes.double())
            iou = iou[iou != 0]
            for base in (0.0, 0.3, 0.7):
                # 0 as is: a touching pair's IoU is exactly 0 on both devices
                thr = base if base <= 0 else _away_from_ious(iou, [base + 1e-4 * k for k in range(50)])
                yield Sample((boxes, scores, thr) if normal else (boxes, scores, thr, pre, post))

    return samples


class _Overlaps(torch.nn.Module):
    """The ops and the mmcv-style wrappers."""

    def forward(self, a: torch.Tensor, b: torch.Tensor):
        return torch.ops.mmops.boxes_overlap_bev(a * 1.0, b) + 1, mmops.boxes_overlap_bev(a, b)


class _Ious(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor):
        return torch.ops.mmops.boxes_iou_bev(a * 1.0, b) * 2, mmops.boxes_iou_bev(a, b)


class _PostNms(torch.nn.Module):
    """The op (its unbacked size used further on) and the wrapper."""

    def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
        keep = torch.ops.mmops.nms_bev(boxes * 1.0, scores, 0.3, None, 5)
        keep2 = mmops.nms_bev(boxes, scores, 0.5, 30)
        return boxes[keep].sum(1) + 1, keep2


class _PostNormal(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
        keep = torch.ops.mmops.nms_normal_bev(boxes, scores, 0.3)
        return scores[keep] * 2, mmops.nms_normal_bev(boxes, scores, 0.5)


_Z = torch.zeros


def _pairs_bad(op, cols, layout):
    other = 5 if cols == 7 else 7
    return {
        "boxes_a_cols": BadInput(
            lambda *_: (_Z(3, other), _Z(2, cols)),
            rf"{op}: expected boxes_a to be a 2-D tensor of shape \[N, {cols}\] {layout}",
            meta=True,
        ),
        "boxes_b_1d": BadInput(
            lambda *_: (_Z(3, cols), _Z(cols)), rf"boxes_b to be a 2-D tensor of shape \[M, {cols}\]", meta=True
        ),
        "long": BadInput(
            lambda *_: (_Z(3, cols, dtype=torch.long), _Z(2, cols, dtype=torch.long)),
            "boxes_a to have a floating point dtype, but got Long",
        ),
        "dtype_mismatch": BadInput(
            lambda *_: (_Z(3, cols), _Z(2, cols, dtype=torch.float64)),
            r"boxes_b to have the dtype of boxes_a \(Float\), but got Double",
        ),
        "device": BadInput(
            lambda *_: (_Z(3, cols, device="cuda"), _Z(2, cols)), "boxes_b on the device of boxes_a", cuda=True
        ),
    }


NMS_BAD = {
    "boxes_7_cols": BadInput(
        lambda *_: (_Z(3, 7), _Z(3), 0.5, None, None),
        r"mmops::nms_bev: expected boxes to be a 2-D tensor of shape \[N, 5\] \(x1, y1, x2, y2, ry\)",
        meta=True,
    ),
    "scores_length": BadInput(
        lambda *_: (_Z(3, 5), _Z(4), 0.5, None, None),
        r"scores to be a 1-D tensor of shape \[N\] with N = boxes.size\(0\) = 3, but got shape \[4\]",
    ),
    "scores_int": BadInput(
        lambda *_: (_Z(3, 5), _Z(3, dtype=torch.int32), 0.5, None, None), "scores to have a floating point dtype"
    ),
    "thresh_nan": BadInput(lambda *_: (_Z(3, 5), _Z(3), float("nan"), None, None), "thresh must be a number"),
    "pre_negative": BadInput(
        lambda *_: (_Z(3, 5), _Z(3), 0.5, -1, None), "pre_max_size must be None or >= 0, but got -1", meta=True
    ),
    "post_negative": BadInput(
        lambda *_: (_Z(3, 5), _Z(3), 0.5, None, -2), "post_max_size must be None or >= 0, but got -2", meta=True
    ),
    "scores_on_cpu": BadInput(
        lambda *_: (_Z(3, 5, device="cuda"), _Z(3), 0.5, None, None), "scores on the device of boxes", cuda=True
    ),
}
NORMAL_BAD = {
    "boxes_4_cols": BadInput(
        lambda *_: (_Z(3, 4), _Z(3), 0.5), r"mmops::nms_normal_bev: expected boxes to be a 2-D tensor of shape \[N, 5\]"
    ),
    "boxes_long": BadInput(
        lambda *_: (_Z(3, 5, dtype=torch.long), _Z(3), 0.5), "boxes to have a floating point dtype, but got Long"
    ),
    "thresh_nan": BadInput(
        lambda *_: (_Z(3, 5), _Z(3), float("nan")), "mmops::nms_normal_bev: thresh must be a number"
    ),
}


def _pairs_case(op, make, cols, layout, module):
    name = op._qualified_op_name.split("::")[1]
    return ConformanceCase(
        name,
        op,
        _pairs_sample(make),
        dtypes=DTYPES,
        empty=_pairs_empty(cols),
        cuda_samples=_pairs_cuda_samples(make),
        cuda_tol=rotated_cuda_tol,
        bad_inputs=_pairs_bad(f"mmops::{name}", cols, layout),
        module=module,
    )


CONFORMANCE = [
    _pairs_case(overlap_op, random_boxes7, 7, r"\(x, y, z, dx, dy, dz, heading\)", _Overlaps),
    _pairs_case(iou_op, random_xyxyr, 5, r"\(x1, y1, x2, y2, ry\)", _Ious),
    ConformanceCase(
        "nms_bev_pre_post",
        nms_op,
        _nms_sample(0.2, 30, 7),
        dtypes=DTYPES,
        data_dependent=True,
        empty=_nms_empty((0.5, 4, 2)),
        cuda_samples=_nms_cuda_samples(500, 40),
    ),
    ConformanceCase(
        "nms_bev",
        nms_op,
        _nms_sample(0.3, None, None),
        dtypes=DTYPES,
        data_dependent=True,
        empty=_nms_empty((0.5, None, None)),
        cuda_samples=_nms_cuda_samples(None, None),
        bad_inputs=NMS_BAD,
        module=_PostNms,
    ),
    ConformanceCase(
        "nms_normal_bev",
        normal_op,
        _nms_sample(0.3, None, None, normal=True),
        dtypes=DTYPES,
        data_dependent=True,
        empty=_nms_empty((0.5,)),
        cuda_samples=_nms_cuda_samples(None, None, normal=True),
        bad_inputs=NORMAL_BAD,
        module=_PostNormal,
    ),
]


class TestIou3dConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


def test_overlap_against_exact_reference():
    a = random_boxes7(12, seed=5, dtype=torch.float64)
    b = random_boxes7(10, seed=6, dtype=torch.float64)
    exp = overlaps_ref(a, b, iou=False)
    assert (exp > 0).sum() > 12  # not a vacuous comparison
    torch.testing.assert_close(overlap_op(a, b), exp, rtol=1e-10, atol=1e-10)
    fa, fb = a.float(), b.float()
    torch.testing.assert_close(overlap_op(fa, fb), overlaps_ref(fa, fb, iou=False).float(), rtol=1e-5, atol=1e-4)
    # z and dz do not matter
    moved = a.clone()
    moved[:, 2] += 100
    moved[:, 5] *= 3
    assert torch.equal(overlap_op(moved, b), overlap_op(a, b))


def test_iou_against_exact_reference():
    a = random_xyxyr(12, seed=5, dtype=torch.float64)
    b = random_xyxyr(10, seed=6, dtype=torch.float64)
    exp = overlaps_ref(a, b, iou=True)
    assert (exp > 0).sum() > 12
    torch.testing.assert_close(iou_op(a, b), exp, rtol=1e-10, atol=1e-12)
    fa, fb = a.float(), b.float()
    torch.testing.assert_close(iou_op(fa, fb), overlaps_ref(fa, fb, iou=True).float(), rtol=0, atol=1e-5)


def test_iou_is_box_iou_rotated_of_the_converted_boxes():
    # mmcv 2.x: boxes_iou_bev(a, b) = box_iou_rotated(_xyxyr2xywhr(a), _xyxyr2xywhr(b)), bit for bit
    for dtype in (torch.float32, torch.float64):
        a, b = random_xyxyr(30, seed=7, dtype=dtype), random_xyxyr(20, seed=8, dtype=dtype)

        def convert(x):
            return torch.stack(
                [(x[:, 0] + x[:, 2]) / 2, (x[:, 1] + x[:, 3]) / 2, x[:, 2] - x[:, 0], x[:, 3] - x[:, 1], x[:, 4]], 1
            )

        assert torch.equal(iou_op(a, b), mmops.box_iou_rotated(convert(a), convert(b)))


MMCV_OVERLAP_A = [[1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 0.0], [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 0.0],
                  [3.0, 3.0, 3.0, 3.0, 2.0, 2.0, 0.0]]  # fmt: skip
MMCV_OVERLAP_B = [[1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 0.0], [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, PI / 2],
                  [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, PI / 4]]  # fmt: skip
MMCV_OVERLAP = [[4.0, 4.0, (8 + 8 * 2**0.5) / (3 + 2 * 2**0.5)], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
MMCV_IOU_A = [[1.0, 1.0, 3.0, 4.0, 0.5], [2.0, 2.0, 3.0, 4.0, 0.6], [7.0, 7.0, 8.0, 8.0, 0.4]]
MMCV_IOU_B = [[0.0, 2.0, 2.0, 5.0, 0.3], [2.0, 1.0, 3.0, 3.0, 0.5], [5.0, 5.0, 6.0, 7.0, 0.4]]
MMCV_IOU = [[0.2621, 0.2948, 0.0000], [0.0549, 0.1587, 0.0000], [0.0000, 0.0000, 0.0000]]
MMCV_NMS_BOXES = [[6.0, 3.0, 8.0, 7.0, 2.0], [3.0, 6.0, 9.0, 11.0, 1.0], [3.0, 7.0, 10.0, 12.0, 1.0],
                  [1.0, 4.0, 13.0, 7.0, 3.0]]  # fmt: skip
MMCV_NMS_SCORES = [0.6, 0.9, 0.7, 0.2]


@pytest.mark.parametrize("dtype", DTYPES)
def test_mmcv_vectors(dtype):
    # mmcv tests/test_ops/test_iou3d.py: test_boxes_overlap_bev (2.x, also with boxes_b
    # repeated 555 times), test_boxes_iou_bev, test_nms_bev, test_nms_normal_bev (1.x files;
    # the same values under 2.x's box_iou_rotated / nms_rotated / nms definitions)
    tol = dict(rtol=0, atol=1e-4 if dtype in (torch.float32, torch.float64) else 3e-2)
    a, b = torch.tensor(MMCV_OVERLAP_A, dtype=dtype), torch.tensor(MMCV_OVERLAP_B, dtype=dtype)
    torch.testing.assert_close(mmops.boxes_overlap_bev(a, b).float(), torch.tensor(MMCV_OVERLAP), **tol)
    many = mmops.boxes_overlap_bev(a, b.repeat_interleave(555, 0)).float()
    torch.testing.assert_close(many, torch.tensor(MMCV_OVERLAP).repeat_interleave(555, 1), **tol)
    a, b = torch.tensor(MMCV_IOU_A, dtype=dtype), torch.tensor(MMCV_IOU_B, dtype=dtype)
    torch.testing.assert_close(mmops.boxes_iou_bev(a, b).float(), torch.tensor(MMCV_IOU), **tol)
    boxes, scores = torch.tensor(MMCV_NMS_BOXES, dtype=dtype), torch.tensor(MMCV_NMS_SCORES, dtype=dtype)
    assert mmops.nms_bev(boxes, scores, 0.3).tolist() == [1, 0, 3]
    assert mmops.nms_normal_bev(boxes, scores, 0.3).tolist() == [1, 0, 3]


def test_heading_turns_x_towards_y():
    # a long box along y = x (heading +pi/4) covers the small square at (1, 1); along y = -x it misses it
    square = [1.0, 1.0, 0.0, 0.5, 0.5, 1.0, 0.0]
    for heading, expected in ((PI / 4, 0.25), (-PI / 4, 0.0)):
        a = torch.tensor([[0.0, 0.0, 0.0, 4.0, 1.0, 1.0, heading]], dtype=torch.float64)
        got = overlap_op(a, torch.tensor([square], dtype=torch.float64))[0, 0].item()
        assert got == pytest.approx(expected, abs=1e-12)
    # the same for (x1, y1, x2, y2, ry): the angle turns the x side towards +y
    a = torch.tensor([[-2.0, -0.5, 2.0, 0.5, PI / 4]], dtype=torch.float64)
    b = torch.tensor([[0.75, 0.75, 1.25, 1.25, 0.0]], dtype=torch.float64)
    assert iou_op(a, b)[0, 0].item() == pytest.approx(0.25 / 4.0, abs=1e-12)
    a[0, 4] = -PI / 4
    assert iou_op(a, b)[0, 0].item() == 0.0


def test_identical_and_touching_boxes_are_exact():
    # mmcv's iou3d kernels misjudge these; the exact clip: identical -> IoU exactly 1 and the
    # overlap the box's area; touching (a shared edge or corner) -> exactly 0
    b7 = random_boxes7(20, seed=9, dtype=torch.float64)
    for dtype in (torch.float32, torch.float64):
        x = to_xyxyr(b7[:, [0, 1, 3, 4, 6]]).to(dtype)
        assert torch.equal(iou_op(x, x).diagonal(), torch.ones(20, dtype=dtype))
    area = overlap_op(b7, b7).diagonal()
    torch.testing.assert_close(area, b7[:, 3] * b7[:, 4], rtol=1e-12, atol=0)
    exp = torch.tensor([area_ref(r, r) for r in b7[:, [0, 1, 3, 4, 6]].tolist()], dtype=torch.float64)
    torch.testing.assert_close(area, exp, rtol=1e-12, atol=0)
    touching = torch.tensor(
        [[0.0, 0.0, 2.0, 1.0, 0.0], [2.0, 0.0, 3.0, 1.0, 0.0], [2.0, 1.0, 4.0, 3.0, 0.0], [0.0, 1.0, 2.0, 2.0, 0.0]],
        dtype=torch.float64,
    )
    iou = iou_op(touching, touching)
    assert torch.equal(iou, torch.eye(4, dtype=torch.float64))
    # quarter turns of a square about its centre are the same square
    sq = torch.tensor([[0.0, 0.0, 0.0, 2.0, 2.0, 1.0, k * PI / 2] for k in range(4)], dtype=torch.float64)
    torch.testing.assert_close(overlap_op(sq, sq), torch.full((4, 4), 4.0, dtype=torch.float64), rtol=1e-12, atol=0)
    # nms: a touching box survives thresh 0, an identical one does not
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6])
    assert nms_op(touching, scores, 0.0).tolist() == [0, 1, 2, 3]
    assert normal_op(touching, scores, 0.0).tolist() == [0, 1, 2, 3]
    twice = torch.cat([touching[:1], touching[:1]])
    assert nms_op(twice, scores[:2], 0.99).tolist() == [0]


def test_non_finite_and_degenerate_boxes_overlap_nothing():
    b = random_boxes7(6, image=3.0, seed=11, dtype=torch.float64)
    bad = b.clone()
    bad[0, 0] = float("nan")
    bad[1, 6] = float("inf")
    bad[2, 3] = 0.0
    bad[3, 4] = -1.0
    got = overlap_op(bad, b)
    assert torch.equal(got[:4], torch.zeros(4, 6, dtype=torch.float64))
    assert (got[4:] > 0).any()
    x = to_xyxyr(b[:, [0, 1, 3, 4, 6]])
    x[0, 1] = float("nan")
    x[1, 2] = x[1, 0]  # zero width
    x[2, 0], x[2, 2] = x[2, 2].item(), x[2, 0].item()  # x2 < x1: negative width
    x[3, 3] = float("-inf")
    iou = iou_op(x, x)
    assert torch.equal(iou[:4], torch.zeros(4, 6, dtype=torch.float64))
    assert torch.equal(iou[:, :4], torch.zeros(6, 4, dtype=torch.float64))
    assert not iou.isnan().any()


def test_nms_bev_against_float64_greedy_reference():
    for dtype in (torch.float32, torch.float64):
        boxes, scores = clustered_xyxyr(60, seed=7, dtype=dtype)
        iou = overlaps_ref(boxes, boxes, iou=True).tolist()
        for thr in (0.1, 0.3, 0.5, 0.7):
            thr = safe_threshold(iou, [thr, thr + 0.0123, thr - 0.0071])
            exp = nms_ref(boxes, scores, thr, iou=iou)
            assert 1 < len(exp) < 60
            assert nms_op(boxes, scores, thr).tolist() == exp.tolist()
        # the IoU nms_bev decides on is boxes_iou_bev's, bit for bit: any threshold
        own = iou_op(boxes, boxes).tolist()
        for thr in (0.25, 0.45):
            assert nms_op(boxes, scores, thr).tolist() == nms_ref(boxes, scores, thr, iou=own).tolist()


def test_nms_bev_pre_and_post_max_size():
    boxes, scores = clustered_xyxyr(50, seed=12, dtype=torch.float64)
    iou = iou_op(boxes, boxes).tolist()
    order = score_order_ref(scores)
    full = nms_ref(boxes, scores, 0.3, iou=iou).tolist()
    for pre in (0, 1, 10, 33, 50, 80):
        top = order[:pre]
        sub = [[iou[i][j] for j in top] for i in top]
        exp = [top[k] for k in nms_ref(boxes[top], scores[top], 0.3, iou=sub).tolist()] if top else []
        assert nms_op(boxes, scores, 0.3, pre, None).tolist() == exp
        for post in (0, 2, 5, 1000):
            assert mmops.nms_bev(boxes, scores, 0.3, pre, post).tolist() == exp[:post]
    assert mmops.nms_bev(boxes, scores, 0.3, None, 3).tolist() == full[:3]
    assert 3 < len(full) < 50


def test_nms_normal_bev_ignores_the_angle():
    boxes, scores = clustered_xyxyr(60, seed=13, dtype=torch.float64)
    iou = aligned_iou_ref(boxes).tolist()
    for thr in (0.2, 0.5):
        thr = safe_threshold(iou, [thr, thr + 0.0123])
        exp = nms_ref(boxes, scores, thr, iou=iou)
        assert 1 < len(exp) < 60
        assert normal_op(boxes, scores, thr).tolist() == exp.tolist()
        turned = boxes.clone()
        turned[:, 4] = torch.rand(60, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 3
        assert normal_op(turned, scores, thr).tolist() == exp.tolist()
        assert normal_op(boxes, scores, thr).tolist() == mmops.nms(boxes[:, :4], scores, thr)[1].tolist()


def test_nms_ties_nan_inf():
    base = [[0.0, 0.0, 4.0, 2.0, 0.3]] * 4 + [[20.0, 20.0, 22.0, 22.0, 0.0]]
    boxes = torch.tensor(base, dtype=torch.float64)
    for op in (nms_op, normal_op):
        # equal scores: lower index first, the others suppressed
        assert op(boxes, torch.tensor([0.5, 0.5, 0.5, 0.5, 0.1]), 0.5).tolist() == [0, 4]
        # NaN score: after every number; still kept when nothing suppresses it
        assert op(boxes, torch.tensor([0.2, float("nan"), 0.9, 0.3, float("nan")]), 0.5).tolist() == [2, 4]
        # a box with a NaN / Inf value overlaps nothing: kept by its score, suppresses nothing
        bad = boxes.clone()
        bad[0, 0] = float("nan")
        bad[1, 2] = float("inf")
        s = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
        assert op(bad, s, 0.5).tolist() == [0, 1, 2, 4]
        # threshold 1: nothing is suppressed (IoU is never > 1)
        assert op(boxes, s, 1.0).tolist() == [0, 1, 2, 3, 4]
    # threshold < 0: every later box is suppressed (IoU 0 > thr), even a disjoint one
    assert nms_op(boxes, torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5]), -0.1).tolist() == [0]
    # ties with pre_max_size: the lower indices are the best
    assert nms_op(boxes, torch.full((5,), 0.5), 0.5, 2, None).tolist() == [0]


def test_low_precision_uses_the_rounded_values():
    a7, b7 = random_boxes7(20, seed=14, dtype=torch.float64), random_boxes7(15, seed=15, dtype=torch.float64)
    a5, b5 = random_xyxyr(20, seed=14, dtype=torch.float64), random_xyxyr(15, seed=15, dtype=torch.float64)
    boxes, scores = clustered_xyxyr(50, seed=16, dtype=torch.float64)
    for dtype in (torch.float16, torch.bfloat16):
        for op, a, b in ((overlap_op, a7, b7), (iou_op, a5, b5)):
            low = op(a.to(dtype), b.to(dtype))
            assert low.dtype == dtype
            assert torch.equal(low, op(a.to(dtype).float(), b.to(dtype).float()).to(dtype))
        bl, sl = boxes.to(dtype), scores.to(dtype)
        assert nms_op(bl, sl, 0.3).tolist() == nms_op(bl.float(), sl.float(), 0.3).tolist()
        assert normal_op(bl, sl, 0.3).tolist() == normal_op(bl.float(), sl.float(), 0.3).tolist()


def test_strided_inputs():
    a7, b7 = random_boxes7(9, seed=17), random_boxes7(8, seed=18)
    wide = torch.cat([a7, a7], 1)[:, ::2]  # strided columns: other values
    assert torch.equal(overlap_op(wide, b7.t().contiguous().t()), overlap_op(wide.contiguous(), b7))
    boxes, scores = clustered_xyxyr(40, seed=19)
    wide = torch.cat([boxes, boxes], 1)[:, ::2]
    s = torch.stack([scores, scores], 1)[:, 0]
    for op in (nms_op, normal_op):
        args = (0.3, None, None) if op is nms_op else (0.3,)
        assert op(wide, s, *args).tolist() == op(wide.contiguous(), s.contiguous(), *args).tolist()
    assert torch.equal(iou_op(wide, wide[:5]), iou_op(wide.contiguous(), wide[:5].contiguous()))


def test_autocast_mixed_dtypes():
    boxes, scores = clustered_xyxyr(30, seed=20)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        iou = iou_op(boxes.bfloat16(), boxes)
        keep = nms_op(boxes.bfloat16(), scores, 0.3)
    # float32 inside; the result in the dtype of the first box argument
    assert iou.dtype == torch.bfloat16
    assert torch.equal(iou, iou_op(boxes.bfloat16().float(), boxes).bfloat16())
    assert keep.tolist() == nms_op(boxes.bfloat16().float(), scores, 0.3).tolist()


# ----------------------------------------------------------------------------- mmcv.ops bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine")
    pytest.importorskip("mmcv")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops")
    from mmcv.ops import iou3d

    a7, b7 = random_boxes7(12, image=8.0, seed=21), random_boxes7(9, image=8.0, seed=22)
    assert torch.equal(ops.boxes_overlap_bev(a7, b7), mmops.boxes_overlap_bev(a7, b7))
    assert torch.equal(iou3d.boxes_overlap_bev(a7, b7), mmops.boxes_overlap_bev(a7, b7))
    # mmcv's own boxes_iou3d runs on the served ext kernel (iou3d_boxes_overlap_bev_forward)
    a, b = a7.double(), b7.double()
    top = torch.minimum(a[:, None, 2] + a[:, None, 5] / 2, b[None, :, 2] + b[None, :, 5] / 2)
    bottom = torch.maximum(a[:, None, 2] - a[:, None, 5] / 2, b[None, :, 2] - b[None, :, 5] / 2)
    inter = overlaps_ref(a7, b7, iou=False) * (top - bottom).clamp(min=0)
    volume = a[:, 3] * a[:, 4] * a[:, 5], b[:, 3] * b[:, 4] * b[:, 5]
    exp = inter / (volume[0][:, None] + volume[1][None, :] - inter)
    assert (exp > 0).sum() > 5
    torch.testing.assert_close(ops.boxes_iou3d(a7, b7).double(), exp, rtol=1e-4, atol=1e-6)
    boxes, scores = clustered_xyxyr(60, seed=23)
    assert torch.equal(ops.boxes_iou_bev(boxes, boxes[:7]), mmops.boxes_iou_bev(boxes, boxes[:7]))
    assert ops.nms_bev(boxes, scores, 0.3, 40, 9).tolist() == mmops.nms_bev(boxes, scores, 0.3, 40, 9).tolist()
    assert ops.nms_normal_bev(boxes, scores, 0.3).tolist() == mmops.nms_normal_bev(boxes, scores, 0.3).tolist()
    b, s = torch.tensor(MMCV_NMS_BOXES), torch.tensor(MMCV_NMS_SCORES)
    assert ops.nms_bev(b, s, 0.3).tolist() == [1, 0, 3]
    assert ops.nms_normal_bev(b, s, 0.3).tolist() == [1, 0, 3]


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_many_tiles(dtype):
    boxes, scores = clustered_xyxyr(5000, objects=200, image=1000.0, seed=1, dtype=dtype)
    a7 = random_boxes7(700, image=200.0, seed=2, dtype=dtype)
    tol = rotated_cuda_tol(dtype, None, None, None)
    torch.testing.assert_close(overlap_op(a7.cuda(), a7.cuda()).cpu(), overlap_op(a7, a7), **tol)
    torch.testing.assert_close(iou_op(boxes.cuda(), boxes[:900].cuda()).cpu(), iou_op(boxes, boxes[:900]), **tol)
    for thr in (0.0, 0.3, 0.6):
        for pre, post in ((None, None), (3000, 100)):
            exp = nms_op(boxes, scores, thr, pre, post)
            got = nms_op(boxes.cuda(), scores.cuda(), thr, pre, post).cpu()
            # float32: an IoU within an ulp of thr may flip between the devices' sin/cos
            if dtype == torch.float64:
                assert got.tolist() == exp.tolist()
            else:
                assert len(set(got.tolist()) ^ set(exp.tolist())) <= max(2, len(exp) // 500)
        assert normal_op(boxes.cuda(), scores.cuda(), thr).cpu().tolist() == normal_op(boxes, scores, thr).tolist()


@pytest.mark.cuda
def test_cuda_edge_cases():
    touching = torch.tensor([[0.0, 0.0, 2.0, 1.0, 0.0], [2.0, 0.0, 3.0, 1.0, 0.0]], device="cuda")
    assert torch.equal(iou_op(touching, touching).cpu(), torch.eye(2))
    x = random_xyxyr(50, seed=3, device="cuda")
    assert torch.equal(iou_op(x, x).diagonal().cpu(), torch.ones(50))
    boxes = torch.tensor([[0, 0, 4, 2, 0.3]] * 4 + [[20, 20, 22, 22, 0]], device="cuda")
    scores = torch.tensor([0.2, float("nan"), 0.9, 0.3, float("nan")], device="cuda")
    assert nms_op(boxes, scores, 0.5).tolist() == [2, 4]
    assert nms_op(boxes[:0], scores[:0], 0.5).shape == (0,)
    assert overlap_op(torch.zeros(0, 7, device="cuda"), torch.zeros(3, 7, device="cuda")).shape == (0, 3)
    b, s = torch.tensor(MMCV_NMS_BOXES, device="cuda"), torch.tensor(MMCV_NMS_SCORES, device="cuda")
    assert nms_op(b, s, 0.3).tolist() == [1, 0, 3]
