"""mmops nms, batched_nms and soft_nms: the conformance cases, then float64 references
written here, mmcv's published vectors, ties / NaN / strides, the wrappers, torchvision
and the CUDA-specific tests (skipped without a GPU)."""

import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import requires_torchvision

import mmops

nms_op = torch.ops.mmops.nms
batched_op = torch.ops.mmops.batched_nms
soft_op = torch.ops.mmops.soft_nms

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


# ----------------------------------------------------------------------------- references


def iou_matrix_ref(boxes):
    """float64 IoU of every pair, with mmops' defined results: a box with a
    non-finite coordinate overlaps nothing; a union <= 0 gives 0."""
    b = boxes.detach().double().cpu()
    x1, y1, x2, y2 = b.unbind(1)
    finite = torch.isfinite(b).all(1)
    area = (x2 - x1) * (y2 - y1)
    w = (torch.minimum(x2[:, None], x2[None]) - torch.maximum(x1[:, None], x1[None])).clamp(min=0)
    h = (torch.minimum(y2[:, None], y2[None]) - torch.maximum(y1[:, None], y1[None])).clamp(min=0)
    inter = w * h
    union = area[:, None] + area[None] - inter
    iou = torch.where(union > 0, inter / torch.where(union > 0, union, torch.ones_like(union)), torch.zeros_like(union))
    ok = finite[:, None] & finite[None]
    return torch.where(ok, iou, torch.zeros_like(iou))


def score_order_ref(scores):
    """Decreasing score, NaN after every number, ties to the lower index."""
    s = scores.detach().double().cpu().tolist()
    return sorted(range(len(s)), key=lambda i: (math.isnan(s[i]), 0.0 if math.isnan(s[i]) else -s[i], i))


def nms_ref(boxes, scores, thr, idxs=None):
    n = boxes.shape[0]
    iou = iou_matrix_ref(boxes)
    cats = None if idxs is None else idxs.cpu().tolist()
    order = score_order_ref(scores)
    removed = [False] * n
    keep = []
    for pos, i in enumerate(order):
        if removed[i]:
            continue
        keep.append(i)
        for j in order[pos + 1 :]:
            if (cats is None or cats[j] == cats[i]) and iou[i, j].item() > thr:
                removed[j] = True
    return torch.tensor(keep, dtype=torch.long)


def batched_by_category_ref(boxes, scores, idxs, thr):
    """batched_nms as the brief states it: nms per category, merged by score."""
    kept = []
    for c in torch.unique(idxs).tolist():
        members = torch.nonzero(idxs == c).squeeze(1)
        kept += members[nms_ref(boxes[members], scores[members], thr)].tolist()
    s = scores.double().tolist()
    kept.sort(key=lambda i: (math.isnan(s[i]), 0.0 if math.isnan(s[i]) else -s[i], i))
    return torch.tensor(kept, dtype=torch.long)


def soft_nms_ref(boxes, scores, thr=0.3, sigma=0.5, min_score=1e-3, method="linear"):
    """mmcv's soft-NMS as a set procedure: pick the best remaining box (ties: lower
    index), output it, decay every other remaining box, drop those < min_score.
    NaN scores are dropped (at the start, and inf * 0 after a decay)."""
    iou = iou_matrix_ref(boxes)
    score = scores.detach().double().cpu().clone()
    live = [i for i in range(len(score)) if not math.isnan(score[i].item())]
    keep, out_scores = [], []
    while live:
        best = max(live, key=lambda i: (score[i].item(), -i))
        keep.append(best)
        out_scores.append(score[best].item())
        live.remove(best)
        for j in live:
            o = iou[best, j].item()
            if method == "naive":
                w = 0.0 if o >= thr else 1.0
            elif method == "linear":
                w = 1.0 - o if o >= thr else 1.0
            else:
                w = math.exp(-(o * o) / sigma)
            score[j] *= w
        live = [j for j in live if score[j].item() >= min_score]  # NaN dropped
    k = torch.tensor(keep, dtype=torch.long)
    dets = torch.cat(
        [boxes.detach().double().cpu()[k].reshape(-1, 4), torch.tensor(out_scores, dtype=torch.float64).reshape(-1, 1)],
        1,
    )
    return dets, k


def random_boxes(n, *, image=100.0, max_side=30.0, dtype=torch.float32, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g, dtype=torch.float64) * image
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * max_side
    boxes = torch.cat([xy, xy + wh], 1)
    scores = torch.rand(n, generator=g, dtype=torch.float64)
    return boxes.to(dtype=dtype, device=device), scores.to(dtype=dtype, device=device)


def rounded(t):
    """The values the op sees for a low precision dtype, in float64."""
    return t.double()


# ----------------------------------------------------------------------------- conformance


def _sample(op_args, n=40, seed=31, with_idxs=False, other_n=90):
    """sample(device, dtype, size): n random boxes and scores (other_n for size 1), category ids
    in [0, 3) for batched_nms, then the op's options."""

    def sample(device, dtype, size):
        k = n if size == 0 else other_n
        boxes, scores = random_boxes(k, seed=seed + size, dtype=dtype, device=device)
        idxs = torch.randint(0, 3, (k,), generator=torch.Generator().manual_seed(seed)).to(device)
        return Sample((boxes, scores, idxs, *op_args) if with_idxs else (boxes, scores, *op_args))

    return sample


def _empty(op_args, out_shapes, with_idxs=False):
    def empty(device, dtype):
        boxes, scores = torch.zeros(0, 4, dtype=dtype, device=device), torch.zeros(0, dtype=dtype, device=device)
        idxs = torch.zeros(0, dtype=torch.long, device=device)
        return [
            Sample((boxes, scores, idxs, *op_args) if with_idxs else (boxes, scores, *op_args), out_shapes=out_shapes)
        ]

    return empty


def _cuda_samples(op_args_list, with_idxs=False, max_n=5000):
    """Tiles of 64 boxes (63, 64, 65), several mask chunks (1000, 5000)."""

    def samples(dtype):
        for n in (0, 1, 63, 64, 65, 1000, 5000):
            if n > max_n:
                continue
            boxes, scores = random_boxes(n, image=400.0, max_side=60.0, dtype=dtype, seed=n)
            idxs = torch.randint(0, 7, (n,), generator=torch.Generator().manual_seed(n))
            for op_args in op_args_list:
                yield Sample((boxes, scores, idxs, *op_args) if with_idxs else (boxes, scores, *op_args))

    return samples


def _soft_tol(dtype, what, expected, sample):
    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 1e-3, torch.bfloat16: 1e-2}[dtype]
    return dict(rtol=tol, atol=tol)


class _Post(torch.nn.Module):
    """Detection post-processing: the three ops (their unbacked sizes used further on) and the
    mmcv-style wrappers."""

    def forward(self, boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor):
        keep = torch.ops.mmops.nms(boxes * 1.0, scores, 0.5)
        keep2 = torch.ops.mmops.batched_nms(boxes, scores, idxs, 0.5)
        dets, keep3 = torch.ops.mmops.soft_nms(boxes, scores, 0.3, 0.5, 1e-3, "linear")
        computed = (boxes[keep].sum(1) + 1, scores[keep2] * 2, dets[:, 4] + keep3)
        wrapped_dets, wrapped_keep = mmops.nms(boxes, scores, 0.5, 0, 0.1, 20)
        batched = torch.ops.mmops.batched_nms(boxes, scores, idxs, 0.4)
        soft_dets, soft_keep = mmops.soft_nms(boxes, scores, 0.3, 0.5, 1e-3, "gaussian")
        return computed, wrapped_dets, wrapped_keep, batched, soft_dets, soft_keep


_Z = torch.zeros
CONFORMANCE = [
    ConformanceCase(
        "nms",
        nms_op,
        _sample([0.5]),
        dtypes=DTYPES,
        data_dependent=True,
        empty=_empty([0.5], [(0,)]),
        cuda_samples=_cuda_samples([[thr] for thr in (-0.1, 0.0, 0.5, 0.8)]),
        bad_inputs={
            "boxes_5_cols": BadInput(lambda *_: (_Z(3, 5), _Z(3), 0.5), r"boxes to be a 2-D tensor of shape \[N, 4\]"),
            "scores_length": BadInput(
                lambda *_: (_Z(3, 4), _Z(4), 0.5),
                r"scores to be a 1-D tensor of shape \[N\] with N = boxes.size\(0\) = 3",
            ),
            "boxes_long": BadInput(
                lambda *_: (_Z(3, 4, dtype=torch.long), _Z(3), 0.5),
                "boxes to have a floating point dtype, but got Long",
            ),
            "scores_int": BadInput(
                lambda *_: (_Z(3, 4), _Z(3, dtype=torch.int32), 0.5),
                "scores to have a floating point dtype, but got Int",
            ),
            "threshold_nan": BadInput(lambda *_: (_Z(3, 4), _Z(3), float("nan")), "iou_threshold must be a number"),
            "scores_on_cpu": BadInput(
                lambda *_: (_Z(3, 4, device="cuda"), _Z(3), 0.5), "scores on the device of boxes", cuda=True
            ),
        },
    ),
    ConformanceCase(
        "batched_nms",
        batched_op,
        _sample([0.5], with_idxs=True),
        dtypes=DTYPES,
        data_dependent=True,
        empty=_empty([0.5], [(0,)], with_idxs=True),
        module=_Post,
        compile_tol=dict(rtol=1.3e-6, atol=1e-5),
        cuda_samples=_cuda_samples([[thr] for thr in (-0.1, 0.0, 0.5, 0.8)], with_idxs=True),
        bad_inputs={
            "idxs_float": BadInput(lambda *_: (_Z(3, 4), _Z(3), _Z(3), 0.5), "idxs .* integer dtype, but got Float"),
            "idxs_length": BadInput(
                lambda *_: (_Z(3, 4), _Z(3), _Z(2, dtype=torch.long), 0.5), r"idxs to be a 1-D tensor of shape \[N\]"
            ),
            "idxs_on_cpu": BadInput(
                lambda *_: (_Z(3, 4, device="cuda"), _Z(3, device="cuda"), _Z(3, dtype=torch.long), 0.5),
                "idxs on the device of boxes",
                cuda=True,
            ),
        },
    ),
    *[
        ConformanceCase(
            f"soft_nms_{method}",
            soft_op,
            _sample([0.4 if method == "gaussian" else 0.3, 0.5, 1e-3, method]),
            dtypes=DTYPES,
            data_dependent=True,
            cuda_tol=_soft_tol,
            empty=_empty([0.3, 0.5, 1e-3, method], [(0, 5), (0,)]),
            cuda_samples=_cuda_samples([[0.3, 0.5, 1e-3, method]], max_n=1000),
            bad_inputs={}
            if method != "linear"
            else {
                "method": BadInput(
                    lambda *_: (_Z(3, 4), _Z(3), 0.3, 0.5, 1e-3, "cubic"),
                    'method must be "naive", "linear" or "gaussian", but got "cubic"',
                ),
                "sigma_zero": BadInput(
                    lambda *_: (_Z(3, 4), _Z(3), 0.3, 0.0, 1e-3, "gaussian"),
                    "sigma must be a positive finite number, but got 0",
                ),
                "min_score_nan": BadInput(
                    lambda *_: (_Z(3, 4), _Z(3), 0.3, 0.5, float("nan"), "linear"), "min_score must be a number"
                ),
            },
        )
        for method in ("naive", "linear", "gaussian")
    ],
]


class TestNmsConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- known vectors

MMCV_BOXES = [[6.0, 3.0, 8.0, 7.0], [3.0, 6.0, 9.0, 11.0], [3.0, 7.0, 10.0, 12.0], [1.0, 4.0, 13.0, 7.0]]
MMCV_SCORES = [0.6, 0.9, 0.7, 0.2]


@pytest.mark.parametrize("dtype", DTYPES)
def test_mmcv_nms_vector(dtype):
    # mmcv tests/test_ops/test_nms.py: iou_threshold 0.3 keeps [1, 0, 3].
    boxes = torch.tensor(MMCV_BOXES, dtype=dtype)
    scores = torch.tensor(MMCV_SCORES, dtype=dtype)
    keep = nms_op(boxes, scores, 0.3)
    assert keep.dtype == torch.long
    assert keep.tolist() == [1, 0, 3]
    dets, inds = mmops.nms(boxes, scores, iou_threshold=0.3, offset=0)
    assert inds.tolist() == [1, 0, 3]
    expected = torch.tensor([[3.0, 6.0, 9.0, 11.0, 0.9], [6.0, 3.0, 8.0, 7.0, 0.6], [1.0, 4.0, 13.0, 7.0, 0.2]])
    torch.testing.assert_close(dets.float(), expected.to(dtype).float())


MMCV_SOFT = {
    "linear": ([1, 0, 2, 3], [0.9, 0.6, 0.29024392, 0.2]),
    "gaussian": ([1, 0, 2, 3], [0.9, 0.59630775, 0.35275510, 0.18650459]),
    "naive": ([1, 0, 3], [0.9, 0.6, 0.2]),
}


@pytest.mark.parametrize("method", list(MMCV_SOFT))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mmcv_soft_nms_vector(method, dtype):
    # mmcv tests/test_ops/test_nms.py (iou_threshold 0.3, sigma 0.5, min_score 1e-3)
    boxes = torch.tensor(MMCV_BOXES, dtype=dtype)
    scores = torch.tensor(MMCV_SCORES, dtype=dtype)
    inds, expected_scores = MMCV_SOFT[method]
    dets, keep = mmops.soft_nms(boxes, scores, iou_threshold=0.3, sigma=0.5, method=method)
    assert keep.tolist() == inds
    torch.testing.assert_close(dets[:, :4], boxes[keep], rtol=0, atol=0)
    torch.testing.assert_close(
        dets[:, 4].double(), torch.tensor(expected_scores, dtype=torch.float64), rtol=1e-6, atol=1e-6
    )
    dets2, keep2 = soft_op(boxes, scores, 0.3, 0.5, 1e-3, method)
    assert torch.equal(keep2, keep) and torch.equal(dets2, dets)


# ----------------------------------------------------------------------------- random vs reference


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 7, 64, 65, 300])
def test_nms_random(dtype, n):
    boxes, scores = random_boxes(n, dtype=dtype, seed=n)
    for thr in (-0.1, 0.0, 0.3, 0.5, 0.9):
        keep = nms_op(boxes, scores, thr)
        assert keep.dtype == torch.long and keep.shape == (keep.numel(),)
        assert torch.equal(keep, nms_ref(rounded(boxes), rounded(scores), thr)), thr


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 50, 400])
def test_batched_nms_random(dtype, n):
    boxes, scores = random_boxes(n, dtype=dtype, seed=100 + n)
    idxs = torch.randint(-2, 5, (n,), generator=torch.Generator().manual_seed(n))  # negative ids are fine
    for thr in (0.2, 0.5):
        keep = batched_op(boxes, scores, idxs, thr)
        exp = nms_ref(rounded(boxes), rounded(scores), thr, idxs)
        assert torch.equal(keep, exp)
        assert torch.equal(keep, batched_by_category_ref(rounded(boxes), rounded(scores), idxs, thr))
    # any integer dtype for the categories
    assert torch.equal(batched_op(boxes, scores, idxs.to(torch.int32), 0.5), batched_op(boxes, scores, idxs, 0.5))


def test_batched_nms_one_category_equals_nms():
    boxes, scores = random_boxes(200, seed=3)
    idxs = torch.full((200,), 7)
    assert torch.equal(batched_op(boxes, scores, idxs, 0.4), nms_op(boxes, scores, 0.4))


@pytest.mark.parametrize("method", ["naive", "linear", "gaussian"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_soft_nms_random(method, dtype):
    boxes, scores = random_boxes(120, image=60.0, dtype=dtype, seed=5)
    for thr, sigma, min_score in ((0.3, 0.5, 1e-3), (0.5, 0.2, 0.05), (0.0, 1.0, 0.0)):
        dets, keep = soft_op(boxes, scores, thr, sigma, min_score, method)
        edets, ekeep = soft_nms_ref(rounded(boxes), rounded(scores), thr, sigma, min_score, method)
        assert torch.equal(keep, ekeep)
        assert dets.dtype == dtype and dets.shape == (keep.numel(), 5)
        tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
        torch.testing.assert_close(dets.double(), edets, rtol=tol, atol=tol)


def test_soft_nms_infinite_score():
    # naive: inf * 0 is NaN after the decay; such a score is dropped
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0], [5.0, 5.0, 6.0, 6.0]])
    scores = torch.tensor([float("inf"), float("inf"), 0.5])
    dets, keep = soft_op(boxes, scores, 0.3, 0.5, 1e-3, "naive")
    assert keep.tolist() == [0, 2]
    assert dets[:, 4].tolist() == [float("inf"), 0.5]


def test_soft_nms_first_box_always_kept():
    # mmcv: the best box is output even below min_score; later ones need >= min_score.
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [5.0, 5.0, 6.0, 6.0]])
    scores = torch.tensor([1e-4, 2e-4])
    dets, keep = soft_op(boxes, scores, 0.3, 0.5, 1e-3, "linear")
    assert keep.tolist() == [1]
    torch.testing.assert_close(dets, torch.tensor([[5.0, 5.0, 6.0, 6.0, 2e-4]]))


# ----------------------------------------------------------------------------- ties, NaN, empty


def test_ties_keep_lower_index_first():
    # equal scores: the lower index ranks first, so of two identical boxes it is kept
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0]] * 3 + [[50.0, 50.0, 60.0, 60.0]] * 2)
    scores = torch.tensor([0.5, 0.5, 0.5, 0.5, 0.5])
    assert nms_op(boxes, scores, 0.5).tolist() == [0, 3]
    scores = torch.tensor([0.5, 0.7, 0.7, 0.7, 0.5])
    assert nms_op(boxes, scores, 0.5).tolist() == [1, 3]
    # -0.0 ties with +0.0
    assert nms_op(boxes[:2], torch.tensor([-0.0, 0.0]), 0.5).tolist() == [0]
    assert nms_op(boxes[:2], torch.tensor([0.0, -0.0]), 0.5).tolist() == [0]
    idxs = torch.tensor([1, 1, 2, 1, 1])
    assert batched_op(boxes, torch.full((5,), 0.5), idxs, 0.5).tolist() == [0, 2, 3]
    dets, keep = soft_op(boxes, torch.full((5,), 0.5), 0.3, 0.5, 1e-3, "naive")
    assert keep.tolist() == [0, 3]


def test_threshold_is_strict():
    # IoU exactly 0.5 is not suppressed at threshold 0.5 (IoU > threshold suppresses)
    boxes = torch.tensor([[0.0, 0.0, 2.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
    scores = torch.tensor([0.9, 0.8])
    assert nms_op(boxes, scores, 0.5).tolist() == [0, 1]
    assert nms_op(boxes, scores, 0.4999).tolist() == [0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_and_inf(dtype):
    boxes = torch.tensor(
        [
            [0.0, 0.0, 10.0, 10.0],
            [0.0, 0.0, 10.0, 10.0],
            [1.0, 1.0, 10.0, 10.0],
            [0.0, 0.0, float("nan"), 10.0],
            [0.0, 0.0, float("inf"), 10.0],
            [0.0, 0.0, 10.0, 10.0],
        ],
        dtype=dtype,
    )
    scores = torch.tensor([0.5, float("nan"), 0.4, 0.9, 0.8, float("nan")], dtype=dtype)
    # NaN scores rank last (ties among them by index); NaN/Inf boxes overlap nothing
    assert score_order_ref(scores) == [3, 4, 0, 2, 1, 5]
    assert nms_op(boxes, scores, 0.5).tolist() == [3, 4, 0]
    assert torch.equal(nms_op(boxes, scores, 0.5), nms_ref(rounded(boxes), rounded(scores), 0.5))
    assert batched_op(boxes, scores, torch.zeros(6, dtype=torch.long), 0.5).tolist() == [3, 4, 0]
    # every score NaN: plain index order decides
    all_nan = torch.full((6,), float("nan"), dtype=dtype)
    assert nms_op(boxes, all_nan, 0.5).tolist() == [0, 3, 4]
    # soft_nms drops NaN scores; non-finite boxes do not decay anything
    dets, keep = soft_op(boxes, scores, 0.3, 0.5, 1e-3, "linear")
    edets, ekeep = soft_nms_ref(rounded(boxes), rounded(scores), 0.3, 0.5, 1e-3, "linear")
    assert keep.tolist() == ekeep.tolist() and keep[:2].tolist() == [3, 4]
    assert torch.equal(dets[:, 4].isnan(), edets[:, 4].isnan())


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty(dtype):
    boxes = torch.zeros(0, 4, dtype=dtype)
    scores = torch.zeros(0, dtype=dtype)
    for keep in (nms_op(boxes, scores, 0.5), batched_op(boxes, scores, torch.zeros(0, dtype=torch.long), 0.5)):
        assert keep.dtype == torch.long and keep.shape == (0,)
    dets, keep = soft_op(boxes, scores)
    assert dets.shape == (0, 5) and dets.dtype == dtype and keep.shape == (0,) and keep.dtype == torch.long
    dets, keep = mmops.nms(boxes, scores, 0.5)
    assert dets.shape == (0, 5) and keep.shape == (0,)


def test_strided_inputs():
    boxes, scores = random_boxes(150, seed=9)
    wide = torch.zeros(150, 8)
    wide[:, ::2] = boxes
    s2 = torch.stack([scores, scores], 1)[:, 1]
    assert not wide[:, ::2].is_contiguous() and not s2.is_contiguous()
    assert torch.equal(nms_op(wide[:, ::2], s2, 0.5), nms_op(boxes, scores, 0.5))
    assert torch.equal(soft_op(wide[:, ::2], s2)[1], soft_op(boxes, scores)[1])


def test_mixed_score_dtype():
    boxes, scores = random_boxes(80, dtype=torch.float16, seed=11)
    assert torch.equal(nms_op(boxes, scores.double(), 0.5), nms_ref(rounded(boxes), scores.double(), 0.5))


def test_not_differentiable():
    boxes, scores = random_boxes(20, seed=12)
    boxes.requires_grad_(True)
    keep = nms_op(boxes, scores, 0.5)
    assert not keep.requires_grad
    dets, _ = soft_op(boxes, scores)
    with pytest.raises(RuntimeError, match="not implemented"):
        dets.sum().backward()


# ----------------------------------------------------------------------------- wrappers


def test_wrapper_score_threshold_max_num_offset():
    boxes, scores = random_boxes(200, seed=21)
    dets, inds = mmops.nms(boxes, scores, 0.3, score_threshold=0.4, max_num=10)
    valid = torch.nonzero(scores > 0.4).squeeze(1)
    exp = valid[nms_ref(boxes[valid], scores[valid], 0.3)][:10]
    assert torch.equal(inds, exp)
    torch.testing.assert_close(dets, torch.cat([boxes[exp], scores[exp, None]], 1))
    # offset 1: widths/heights + 1 in the IoU (mmcv's legacy convention)
    b = torch.tensor([[0.0, 0.0, 1.0, 1.0], [1.0, 0.0, 2.0, 1.0]])
    s = torch.tensor([0.9, 0.8])
    assert mmops.nms(b, s, 0.3, offset=0)[1].tolist() == [0, 1]
    # offset 1: areas 2 * 2 = 4, intersection 1 * 2 = 2, IoU 2 / 6
    assert mmops.nms(b, s, 0.34, offset=1)[1].tolist() == [0, 1]
    assert mmops.nms(b, s, 0.33, offset=1)[1].tolist() == [0]
    dets, keep = mmops.soft_nms(b, s, 0.3, method="linear", offset=1)
    assert keep.tolist() == [0, 1]
    torch.testing.assert_close(dets, torch.tensor([[0.0, 0.0, 1.0, 1.0, 0.9], [1.0, 0.0, 2.0, 1.0, 0.8 * (2 / 3)]]))


def test_wrapper_batched_nms_cfg():
    boxes, scores = random_boxes(300, seed=22)
    idxs = torch.randint(0, 4, (300,), generator=torch.Generator().manual_seed(1))
    dets, keep = mmops.batched_nms(boxes, scores, idxs, dict(iou_threshold=0.3))
    assert torch.equal(keep, batched_by_category_ref(boxes, scores, idxs, 0.3))
    torch.testing.assert_close(dets, torch.cat([boxes[keep], scores[keep, None]], 1))
    _, keep = mmops.batched_nms(boxes, scores, idxs, dict(iou_thr=0.3, max_num=5))
    assert torch.equal(keep, batched_by_category_ref(boxes, scores, idxs, 0.3)[:5])
    _, keep = mmops.batched_nms(boxes, scores, idxs, dict(iou_threshold=0.3), class_agnostic=True)
    assert torch.equal(keep, nms_ref(boxes, scores, 0.3))
    _, keep = mmops.batched_nms(boxes, scores, idxs, dict(iou_threshold=0.3, class_agnostic=True))
    assert torch.equal(keep, nms_ref(boxes, scores, 0.3))
    dets, keep = mmops.batched_nms(boxes, scores, idxs, None)
    assert torch.equal(keep, torch.tensor(score_order_ref(scores)))
    # soft_nms per category, merged by decayed score
    dets, keep = mmops.batched_nms(boxes, scores, idxs, dict(type="soft_nms", iou_threshold=0.3))
    parts = []
    for c in range(4):
        members = torch.nonzero(idxs == c).squeeze(1)
        d, k = soft_nms_ref(boxes[members], scores[members], 0.3)
        parts += list(zip(d[:, 4].tolist(), members[k].tolist()))
    parts.sort(key=lambda p: -p[0])
    assert keep.tolist() == [p[1] for p in parts]
    with pytest.raises(ValueError, match="type must be"):
        mmops.batched_nms(boxes, scores, idxs, dict(type="matrix_nms", iou_threshold=0.3))


# ----------------------------------------------------------------------------- torchvision


@requires_torchvision
@pytest.mark.parametrize("n", [10, 500, 2000])
def test_torchvision_cross_check(n):
    import torchvision

    boxes, scores = random_boxes(n, image=300.0, max_side=60.0, seed=n)
    for thr in (0.3, 0.5, 0.7):
        assert torch.equal(nms_op(boxes, scores, thr), torchvision.ops.nms(boxes, scores, thr))
        idxs = torch.randint(0, 10, (n,), generator=torch.Generator().manual_seed(n))
        assert torch.equal(batched_op(boxes, scores, idxs, thr), torchvision.ops.batched_nms(boxes, scores, idxs, thr))


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
def test_cuda_ties_nan_inf():
    boxes = torch.tensor(
        [[0.0, 0.0, 10.0, 10.0]] * 3 + [[0.0, 0.0, float("nan"), 10.0], [0.0, 0.0, float("inf"), 10.0]]
    )
    scores = torch.tensor([0.5, 0.5, float("nan"), 0.5, 0.9])
    for device in ("cpu", "cuda"):
        keep = nms_op(boxes.to(device), scores.to(device), 0.5).cpu()
        assert keep.tolist() == [4, 0, 3], device
    # many ties across tiles: order must be lower index first on the GPU too
    boxes, _ = random_boxes(3000, image=200.0, seed=3)
    scores = (torch.arange(3000) % 7).float()
    assert torch.equal(nms_op(boxes.cuda(), scores.cuda(), 0.5).cpu(), nms_op(boxes, scores, 0.5))
    assert torch.equal(nms_op(boxes.cuda(), scores.cuda(), 0.5).cpu(), nms_ref(boxes, scores, 0.5))


@pytest.mark.cuda
@requires_torchvision
@pytest.mark.parametrize("n", [20000, 200000])
def test_cuda_large_vs_torchvision(n):
    """20k: one mask chunk; 200k: the mask is built in ~19 row chunks of 256 MiB.
    Integer corners: areas and intersections are exact, so the IoU does not
    depend on how either library rounds (torchvision's kernel may fuse a
    multiply-add); distinct scores: the tie rule plays no part."""
    import torchvision

    g = torch.Generator().manual_seed(n)
    xy = torch.randint(0, 800, (n, 2), generator=g).float()
    boxes = torch.cat([xy, xy + torch.randint(1, 101, (n, 2), generator=g).float()], 1).cuda()
    scores = (torch.randperm(n, generator=g).float() / n).cuda()  # distinct: no tie rule involved
    assert torch.equal(nms_op(boxes, scores, 0.5), torchvision.ops.nms(boxes, scores, 0.5))
    idxs = torch.randint(0, 80, (n,), generator=g).cuda()
    assert torch.equal(batched_op(boxes, scores, idxs, 0.5), torchvision.ops.batched_nms(boxes, scores, idxs, 0.5))
