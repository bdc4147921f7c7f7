"""mmops.tv's nms, batched_nms and box utilities: the assertions of torchvision's own
tests (TestNMS, TestBoxConvert, TestBoxArea, TestBoxIou, TestGeneralizedBoxIou) with
float64 references written here, then mmops.tv == torchvision when it is installed."""

import math

import pytest
import torch
from conftest import requires_torchvision
from torch.autograd import gradcheck

from mmops import tv

INT_BOXES = [[0, 0, 100, 100], [0, 0, 50, 50], [200, 200, 300, 300], [0, 0, 25, 25]]
INT_BOXES2 = [[0, 0, 100, 100], [0, 0, 50, 50], [200, 200, 300, 300]]
FLOAT_BOXES = [
    [285.3538, 185.5758, 1193.5110, 851.4551],
    [285.1472, 188.7374, 1192.4984, 851.0669],
    [279.2440, 197.9812, 1189.4746, 849.2019],
]
CONVERT_XYXY = [[0, 0, 100, 100], [0, 0, 0, 0], [10, 15, 30, 35], [23, 35, 93, 95]]
CONVERT_XYWH = [[0, 0, 100, 100], [0, 0, 0, 0], [10, 15, 20, 20], [23, 35, 70, 60]]
CONVERT_CXCYWH = [[50, 50, 100, 100], [0, 0, 0, 0], [20, 25, 20, 20], [58, 65, 70, 60]]


# ----------------------------------------------------------------------------- references


def iou_ref(a, b):
    """float64 IoU of two (x1, y1, x2, y2) lists."""
    iw = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    ih = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union


def giou_ref(a, b):
    hull = (max(a[2], b[2]) - min(a[0], b[0])) * (max(a[3], b[3]) - min(a[1], b[1]))
    iw = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    ih = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - iw * ih
    return iw * ih / union - (hull - union) / hull


def pairwise_ref(fn, boxes1, boxes2):
    rows = boxes1.double().tolist()
    cols = boxes2.double().tolist()
    return torch.tensor([[fn(a, b) for b in cols] for a in rows], dtype=torch.float64)


def greedy_nms_ref(boxes, scores, thr, idxs=None):
    """Keep the best remaining box, drop the remaining ones of its category with IoU > thr."""
    b = boxes.double().tolist()
    order = sorted(range(len(b)), key=lambda i: (-float(scores[i]), i))
    cats = None if idxs is None else idxs.tolist()
    keep = []
    for i in order:
        if all((cats is not None and cats[i] != cats[k]) or iou_ref(b[i], b[k]) <= thr for k in keep):
            keep.append(i)
    return torch.tensor(keep, dtype=torch.int64)


def boxes_with_iou(n, iou_threshold, seed):
    """torchvision's construction: random boxes whose last box has IoU just above the
    threshold with the first (so one suppression sits on the edge)."""
    g = torch.Generator().manual_seed(seed)
    boxes = torch.rand(n, 4, generator=g) * 100
    boxes[:, 2:] += boxes[:, :2]
    boxes[-1] = boxes[0]
    x0, _, x1, _ = boxes[-1].tolist()
    target = iou_threshold + 1e-5
    boxes[-1, 2] += (x1 - x0) * (1 - target) / target
    return boxes, torch.rand(n, generator=g)


def random_boxes(n, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g, dtype=torch.float64) * scale
    return torch.cat([xy, xy + torch.rand(n, 2, generator=g, dtype=torch.float64) * scale], 1).to(dtype)


# ----------------------------------------------------------------------------- nms


@pytest.mark.parametrize("iou", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("seed", range(3))
def test_nms_ref(iou, seed):
    boxes, scores = boxes_with_iou(1000, iou, seed)
    torch.testing.assert_close(tv.nms(boxes, scores, iou), greedy_nms_ref(boxes, scores, iou))


def test_nms_input_errors():
    for boxes, scores in [((4,), (3,)), ((3, 5), (3,)), ((3, 4), (3, 2)), ((3, 4), (4,))]:
        with pytest.raises(RuntimeError):
            tv.nms(torch.rand(*boxes), torch.rand(*scores), 0.5)


def test_nms_float16_keeps_float32s():
    boxes = torch.tensor(FLOAT_BOXES)
    scores = torch.tensor([0.6370, 0.7569, 0.3966])
    keep32 = tv.nms(boxes, scores, 0.2)
    assert keep32.tolist() == [1]
    torch.testing.assert_close(tv.nms(boxes.half(), scores.half(), 0.2), keep32)


def test_nms_empty_and_one_box():
    keep = tv.nms(torch.empty(0, 4), torch.empty(0), 0.5)
    assert keep.dtype == torch.int64 and keep.shape == (0,)
    assert tv.nms(torch.tensor([[0.0, 0, 1, 1]]), torch.tensor([0.3]), 0.5).tolist() == [0]


@pytest.mark.parametrize("seed", range(3))
def test_batched_nms_equals_per_category_nms(seed):
    torch.manual_seed(seed)
    boxes = torch.cat((torch.rand(300, 2), torch.rand(300, 2) + 10), dim=1)
    scores = torch.rand(300)
    idxs = torch.randint(0, 4, (300,))
    keep = tv.batched_nms(boxes, scores, idxs, 0.9)
    assert keep.dtype == torch.int64
    torch.testing.assert_close(keep, greedy_nms_ref(boxes, scores, 0.9, idxs))


def test_batched_nms_empty():
    empty = torch.empty((0,), dtype=torch.int64)
    # torchvision's own check: only the boxes are looked at
    torch.testing.assert_close(tv.batched_nms(empty, None, None, None), empty)
    torch.testing.assert_close(tv.batched_nms(torch.empty(0, 4), torch.empty(0), empty, 0.5), empty)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool, torch.int64])
def test_batched_nms_any_category_dtype(dtype):
    boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 10, 10], [0, 0, 10, 9], [2, 2, 9, 9]])
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6])
    idxs = torch.tensor([0, 1, 0, 1]).to(dtype)
    assert tv.batched_nms(boxes, scores, idxs, 0.5).tolist() == [0, 1]
    if dtype == torch.float32:  # values that are not integers are categories too
        assert tv.batched_nms(boxes, scores, idxs + 0.5, 0.5).tolist() == [0, 1]


def test_nms_scripted_and_compiled():
    boxes, scores = boxes_with_iou(200, 0.5, 0)
    idxs = torch.arange(200) % 3
    for fn, args in [(tv.nms, (boxes, scores, 0.5)), (tv.batched_nms, (boxes, scores, idxs, 0.5))]:
        torch.testing.assert_close(torch.jit.script(fn)(*args), fn(*args))
    assert torch.jit.script(tv.batched_nms)(torch.empty(0, 4), scores[:0], idxs[:0], 0.5).shape == (0,)


def test_compile_nms():
    boxes, scores = boxes_with_iou(100, 0.5, 1)
    idxs = torch.arange(100) % 3

    def post(boxes, scores, idxs):
        return tv.nms(boxes, scores, 0.5), tv.batched_nms(boxes, scores, idxs, 0.5)

    got = torch.compile(post, dynamic=True)(boxes, scores, idxs)
    for g, e in zip(got, post(boxes, scores, idxs)):
        torch.testing.assert_close(g, e)


@requires_torchvision
@pytest.mark.parametrize("n", [0, 1, 2, 500])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nms_equals_torchvision(n, dtype):
    from torchvision import ops

    boxes = random_boxes(n, dtype, seed=n, scale=20)
    scores = torch.rand(n, generator=torch.Generator().manual_seed(n + 1), dtype=dtype)
    idxs = torch.randint(0, 5, (n,), generator=torch.Generator().manual_seed(n + 2))
    torch.testing.assert_close(tv.nms(boxes, scores, 0.4), ops.nms(boxes, scores, 0.4))
    torch.testing.assert_close(tv.batched_nms(boxes, scores, idxs, 0.4), ops.batched_nms(boxes, scores, idxs, 0.4))


@pytest.mark.cuda
@pytest.mark.parametrize("iou", [0.2, 0.5, 0.8])
def test_cuda_nms_equals_cpu(iou):
    boxes, scores = boxes_with_iou(1000, iou, 4)
    idxs = torch.randint(0, 7, (1000,))
    torch.testing.assert_close(tv.nms(boxes.cuda(), scores.cuda(), iou).cpu(), tv.nms(boxes, scores, iou))
    got = tv.batched_nms(boxes.cuda(), scores.cuda(), idxs.cuda(), iou).cpu()
    torch.testing.assert_close(got, tv.batched_nms(boxes, scores, idxs, iou))
    with torch.autocast("cuda"):
        torch.testing.assert_close(tv.nms(boxes.cuda(), scores.cuda(), iou).cpu(), tv.nms(boxes, scores, iou))


# ----------------------------------------------------------------------------- box_convert, box_area


@pytest.mark.parametrize(
    "src, fmt_in, dst, fmt_out",
    [
        (CONVERT_XYXY, "xyxy", CONVERT_XYXY, "xyxy"),
        (CONVERT_XYXY, "xywh", CONVERT_XYXY, "xywh"),
        (CONVERT_XYXY, "cxcywh", CONVERT_XYXY, "cxcywh"),
        (CONVERT_XYXY, "xyxy", CONVERT_XYWH, "xywh"),
        (CONVERT_XYXY, "xyxy", CONVERT_CXCYWH, "cxcywh"),
        (CONVERT_XYWH, "xywh", CONVERT_CXCYWH, "cxcywh"),
    ],
)
def test_box_convert_vectors(src, fmt_in, dst, fmt_out):
    src_t, dst_t = torch.tensor(src, dtype=torch.float), torch.tensor(dst, dtype=torch.float)
    torch.testing.assert_close(tv.box_convert(src_t, fmt_in, fmt_out), dst_t, rtol=0, atol=0)
    torch.testing.assert_close(tv.box_convert(dst_t, fmt_out, fmt_in), src_t, rtol=0, atol=0)
    scripted = torch.jit.script(tv.box_convert)
    torch.testing.assert_close(scripted(src_t, fmt_in, fmt_out), dst_t, rtol=0, atol=0)


def test_box_convert_bad_formats():
    boxes = torch.tensor(CONVERT_XYWH, dtype=torch.float)
    for fmt_in, fmt_out in [("xwyh", "xwcx"), ("cxwyh", "xhwcy"), ("xyxy", "xwcx")]:
        with pytest.raises(ValueError):
            tv.box_convert(boxes, fmt_in, fmt_out)
    with pytest.raises(NotImplementedError, match="rotated"):
        tv.box_convert(torch.zeros(1, 5), "cxcywhr", "xywhr")


def test_box_convert_leading_dims_and_ints():
    boxes = torch.tensor(CONVERT_XYXY).reshape(2, 2, 4)
    out = tv.box_convert(boxes, "xyxy", "cxcywh")
    assert out.shape == (2, 2, 4)
    torch.testing.assert_close(out.reshape(4, 4), torch.tensor(CONVERT_CXCYWH, dtype=torch.float))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_box_area_int(dtype):
    out = tv.box_area(torch.tensor([[0, 0, 100, 100], [0, 0, 0, 0]], dtype=dtype))
    assert out.dtype == (torch.int64 if dtype == torch.int64 else torch.int32)
    assert out.tolist() == [10000, 0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_box_area_float(dtype):
    expected = torch.tensor([604723.0806, 600965.4666, 592761.0085], dtype=dtype)
    torch.testing.assert_close(tv.box_area(torch.tensor(FLOAT_BOXES, dtype=dtype)), expected, rtol=0, atol=1e-4)


def test_box_area_float16_formats_and_script():
    boxes = torch.tensor([[2.825, 1.8625, 3.90, 4.85], [2.825, 4.875, 19.20, 5.10], [2.925, 1.80, 8.90, 4.90]])
    expected = torch.tensor([3.2170, 3.7108, 18.5071])
    torch.testing.assert_close(tv.box_area(boxes.half()), expected, rtol=0, atol=0.01, check_dtype=False)
    for fmt in ("xywh", "cxcywh"):
        torch.testing.assert_close(tv.box_area(tv.box_convert(boxes, "xyxy", fmt), fmt), tv.box_area(boxes))
    torch.testing.assert_close(torch.jit.script(tv.box_area)(boxes), tv.box_area(boxes))


# ----------------------------------------------------------------------------- box_iou, generalized_box_iou


IOU_INT = [[1.0, 0.25, 0.0], [0.25, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0625, 0.25, 0.0]]
GIOU_INT = [[1.0, 0.25, -0.7778], [0.25, 1.0, -0.8611], [-0.7778, -0.8611, 1.0], [0.0625, 0.25, -0.8819]]
FLOAT_EXPECTED = [[1.0, 0.9933, 0.9673], [0.9933, 1.0, 0.9737], [0.9673, 0.9737, 1.0]]


@pytest.mark.parametrize("fn, int_expected", [(tv.box_iou, IOU_INT), (tv.generalized_box_iou, GIOU_INT)])
@pytest.mark.parametrize(
    "boxes1, boxes2, dtypes, atol, which",
    [
        (INT_BOXES, INT_BOXES2, [torch.int16, torch.int32, torch.int64], 1e-4, "int"),
        (FLOAT_BOXES, FLOAT_BOXES, [torch.float16], 0.002, "float"),
        (FLOAT_BOXES, FLOAT_BOXES, [torch.float32, torch.float64], 1e-3, "float"),
    ],
)
def test_iou_vectors(fn, int_expected, boxes1, boxes2, dtypes, atol, which):
    expected = torch.tensor(int_expected if which == "int" else FLOAT_EXPECTED)
    for dtype in dtypes:
        out = fn(torch.tensor(boxes1, dtype=dtype), torch.tensor(boxes2, dtype=dtype))
        torch.testing.assert_close(out, expected, rtol=0, atol=atol, check_dtype=False)


@pytest.mark.parametrize("fn, ref", [(tv.box_iou, iou_ref), (tv.generalized_box_iou, giou_ref)])
def test_iou_cartesian_script_and_gradcheck(fn, ref):
    boxes1, boxes2 = random_boxes(5, seed=1), random_boxes(7, seed=2)
    torch.testing.assert_close(fn(boxes1, boxes2), pairwise_ref(ref, boxes1, boxes2).float())
    ints = torch.tensor(INT_BOXES, dtype=torch.float)
    torch.testing.assert_close(torch.jit.script(fn)(ints, ints), fn(ints, ints))
    a, b = random_boxes(4, torch.float64, 3).requires_grad_(True), random_boxes(3, torch.float64, 4)
    gradcheck(lambda a, b: fn(a, b), (a, b.requires_grad_(True)))


def test_box_iou_leading_dims_and_formats():
    boxes1 = random_boxes(2 * 3 * 5, seed=5, scale=10).reshape(2, 3, 5, 4)
    boxes2 = random_boxes(3 * 6, seed=6, scale=10).reshape(3, 6, 4)
    out = tv.box_iou(boxes1, boxes2)
    assert out.shape == (2, 3, 5, 6)
    for i in range(2):
        for j in range(3):
            torch.testing.assert_close(out[i, j], pairwise_ref(iou_ref, boxes1[i, j], boxes2[j]).float())
    for fmt in ("xywh", "cxcywh"):
        got = tv.box_iou(tv.box_convert(boxes1, "xyxy", fmt), tv.box_convert(boxes2, "xyxy", fmt), fmt=fmt)
        torch.testing.assert_close(got, out)
    assert tv.generalized_box_iou(boxes1, boxes2).shape == (2, 3, 5, 6)
    with pytest.raises(ValueError):
        tv.box_iou(boxes1, boxes2, fmt="xxyy")
    with pytest.raises(NotImplementedError, match="rotated"):
        tv.box_iou(torch.zeros(2, 5), torch.zeros(3, 5), fmt="cxcywhr")


def test_box_iou_degenerate_is_nan_and_empty():
    assert math.isnan(tv.box_iou(torch.zeros(1, 4), torch.zeros(1, 4)).item())
    assert tv.box_iou(torch.empty(0, 4), random_boxes(3)).shape == (0, 3)
    assert tv.box_iou(torch.tensor([0.0, 0, 2, 2]), random_boxes(3)).shape == (1, 3)  # 1-D: one box


@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.float64])
@pytest.mark.parametrize("fmt", ["xyxy", "xywh", "cxcywh"])
def test_boxes_equal_torchvision(fmt, dtype):
    from torchvision import ops

    boxes1 = random_boxes(2 * 7, seed=8, scale=60).reshape(2, 7, 4).to(dtype)
    boxes2 = random_boxes(5, seed=9, scale=60).to(dtype)
    for a, b in [(boxes1, boxes2), (boxes2, boxes2), (boxes1[0, :0], boxes2), (boxes2[0], boxes2)]:
        torch.testing.assert_close(tv.box_iou(a, b, fmt=fmt), ops.box_iou(a, b, fmt=fmt), equal_nan=True)
        torch.testing.assert_close(tv.box_area(a, fmt=fmt), ops.box_area(a, fmt=fmt))
        if fmt == "xyxy":
            torch.testing.assert_close(tv.generalized_box_iou(a, b), ops.generalized_box_iou(a, b), equal_nan=True)
    for fmt_out in ("xyxy", "xywh", "cxcywh"):
        torch.testing.assert_close(tv.box_convert(boxes1, fmt, fmt_out), ops.box_convert(boxes1, fmt, fmt_out))


def test_batched_nms_large_coordinates_and_many_categories():
    """No coordinate-offset trick: boxes far from the origin in many categories keep their IoU."""
    g = torch.Generator().manual_seed(12)
    xy = 4000 + torch.rand(400, 2, generator=g) * 8
    boxes = torch.cat([xy, xy + 0.5 + torch.rand(400, 2, generator=g)], 1)
    scores = torch.rand(400, generator=g)
    idxs = torch.randint(0, 3000, (400,), generator=g) % 40 * 75
    torch.testing.assert_close(tv.batched_nms(boxes, scores, idxs, 0.3), greedy_nms_ref(boxes, scores, 0.3, idxs))


def test_compile_box_iou():
    boxes1 = random_boxes(6, seed=13).reshape(2, 3, 4)
    boxes2 = random_boxes(5, seed=14)
    compiled = torch.compile(lambda a, b: tv.generalized_box_iou(a, b) + tv.box_iou(a, b, fmt="xywh"), fullgraph=True)
    expected = tv.generalized_box_iou(boxes1, boxes2) + tv.box_iou(boxes1, boxes2, fmt="xywh")
    torch.testing.assert_close(compiled(boxes1, boxes2), expected)
