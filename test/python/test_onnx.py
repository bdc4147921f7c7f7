"""ONNX export of the mmops ops (mmops.onnx, docs/onnx.md): each mapping through both
torch.onnx exporters, run in onnxruntime on the CPU against the eager op; the graphs
hold the standard ONNX op where one is claimed, a mmops-domain node otherwise."""

import io
import math
import os
import warnings

import pytest
import torch
from conftest import random_rois

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnxruntime)")

import mmops  # noqa: E402
import mmops.onnx  # noqa: E402

try:
    import onnxscript  # noqa: F401

    HAS_ONNXSCRIPT = True
except ImportError:
    HAS_ONNXSCRIPT = False
needs_onnxscript = pytest.mark.skipif(
    not HAS_ONNXSCRIPT, reason="onnxscript is not installed (the dynamo exporter needs it; pip install onnxscript)"
)

ops = torch.ops.mmops
EXPORTERS = [pytest.param("dynamo", marks=needs_onnxscript), "torchscript"]


class Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def export(fn, args, exporter, names, dynamic=None, opset=19):
    """The ONNX ModelProto of Wrap(fn) exported with torch.onnx.export as a user
    would call it (no mmops arguments); dynamic: {input name: [dynamic dims]}."""
    model = Wrap(fn).eval()  # the TorchScript exporter restores the mode it found, in every submodule
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            shapes = None
            if dynamic:
                shapes = [{d: torch.export.Dim.DYNAMIC for d in dynamic.get(n, [])} or None for n in names]
                shapes = {"args": tuple(shapes)}
            prog = torch.onnx.export(
                model, args, dynamo=True, opset_version=opset, dynamic_shapes=shapes, input_names=names, verbose=False
            )
            return prog.model_proto
        f = io.BytesIO()
        axes = {n: {d: f"{n}_{d}" for d in dims} for n, dims in (dynamic or {}).items()}
        torch.onnx.export(model, args, f, dynamo=False, opset_version=opset, input_names=names, dynamic_axes=axes)
        return onnx.load_from_string(f.getvalue())


def run(model, names, args):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
    assert sorted(feeds) == sorted(names[: len(feeds)])
    return [torch.from_numpy(r) for r in session.run(None, feeds)]


def op_types(model):
    return {(n.domain or "", n.op_type) for n in model.graph.node}


def check(fn, args, exporter, names, onnx_op, tol, dynamic=None, other_args=None):
    """Exports fn(*args), asserts the graph has onnx_op and no mmops node, and compares
    onnxruntime with eager on args and (dynamic shapes) on other_args."""
    model = export(fn, args, exporter, names, dynamic)
    types = op_types(model)
    assert ("", onnx_op) in types, types
    assert not any(d == mmops.onnx.DOMAIN for d, _ in types), types
    for a in [args] + ([other_args] if other_args is not None else []):
        got = run(model, names, a)[0]
        want = fn(*a)
        assert got.shape == want.shape
        torch.testing.assert_close(got.to(want.dtype), want, **tol)
    return model


# --------------------------------------------------------------------------- roi_align


def _roi_inputs(num_rois, seed, dtype=torch.float32, scale=0.25):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 12, 10, generator=g, dtype=dtype)
    rois = random_rois(num_rois, 2, 12, 10, dtype=dtype, spatial_scale=scale, extra=False, generator=g)
    return x, rois


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize(
    "sampling_ratio,pool_mode,aligned",
    [(0, "avg", True), (0, "avg", False), (2, "avg", True), (3, "avg", False), (2, "max", True), (1, "max", False)],
)
def test_roi_align(exporter, sampling_ratio, pool_mode, aligned):
    def fn(x, rois):
        return ops.roi_align(x, rois, [3, 2], 0.25, sampling_ratio, pool_mode, aligned)

    x, rois = _roi_inputs(7, 0)
    other = _roi_inputs(11, 1)
    tol = dict(atol=1e-5, rtol=1e-5)
    model = check(fn, (x, rois), exporter, ["x", "rois"], "RoiAlign", tol, {"rois": [0]}, other)
    assert run(model, ["x", "rois"], (x, rois[:0]))[0].shape == (0, 3, 3, 2)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_roi_align_special_boxes_and_float64(exporter):
    """Degenerate, reversed, outside and whole-map boxes, in float64."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 2, 9, 8, generator=g, dtype=torch.float64)
    rois = random_rois(12, 2, 9, 8, dtype=torch.float64, extra=True, generator=g)
    for aligned in (True, False):

        def fn(x, rois):
            return ops.roi_align(x, rois, [2, 3], 1.0, 0, "avg", aligned)

        check(fn, (x, rois), exporter, ["x", "rois"], "RoiAlign", dict(atol=1e-9, rtol=1e-9))


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_roi_align_module(exporter):
    """mmops.RoIAlign (the public wrapper) exports like the op."""
    head = mmops.RoIAlign(2, spatial_scale=0.25, sampling_ratio=2, pool_mode="max", aligned=True)
    x, rois = _roi_inputs(5, 3)
    check(head, (x, rois), exporter, ["x", "rois"], "MaxPool", dict(atol=1e-5, rtol=1e-5))


def test_onnx_max_mode_differs_from_mmcv():
    """ONNX RoiAlign's own max mode (max of weighted corners) is not mmcv's max of
    the bilinear samples: the reason max mode maps to RoiAlign avg + MaxPool."""
    x, rois = _roi_inputs(6, 4)
    boxes, batch = rois[:, 1:].numpy(), rois[:, 0].long().numpy()
    node = onnx.helper.make_node(
        "RoiAlign", ["X", "R", "B"], ["Y"], mode="max", output_height=2, output_width=2, sampling_ratio=2
    )
    node.attribute.append(onnx.helper.make_attribute("spatial_scale", 0.25))
    vi = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [vi("X", onnx.TensorProto.FLOAT, None), vi("R", onnx.TensorProto.FLOAT, None), vi("B", 7, None)],
        [vi("Y", onnx.TensorProto.FLOAT, None)],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 16)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    onnx_max = torch.from_numpy(session.run(None, {"X": x.numpy(), "R": boxes, "B": batch})[0])
    mmcv_max = ops.roi_align(x, rois, [2, 2], 0.25, 2, "max", True)
    assert (onnx_max - mmcv_max).abs().max() > 1e-2


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_roi_align_max_adaptive_is_custom(exporter):
    """max with sampling_ratio=0 (a per-roi grid): no exact standard graph -> mmops::RoIAlignMax."""

    def fn(x, rois):
        return ops.roi_align(x, rois, [2, 2], 0.25, 0, "max", True)

    model = export(fn, _roi_inputs(4, 5), exporter, ["x", "rois"])
    assert ("mmops", "RoIAlignMax") in op_types(model)
    assert ("", "RoiAlign") not in op_types(model)
    node = next(n for n in model.graph.node if n.op_type == "RoIAlignMax")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["output_height"] == 2 and attrs["aligned"] == 1 and attrs["sampling_ratio"] == 0
    assert any(o.domain == "mmops" for o in model.opset_import)


def _fpn_inputs(num_rois, seed):
    """4 maps (strides 4 to 32) of a 256 x 192 image; boxes of 8 to 400 pixels and a large one: every level is used."""
    g = torch.Generator().manual_seed(seed)
    feats = [torch.randn(2, 3, 64 // 2**i, 48 // 2**i, generator=g) for i in range(4)]
    size = torch.exp(torch.rand(num_rois, 2, generator=g) * math.log(50.0)) * 8
    xy = torch.rand(num_rois, 2, generator=g) * 200
    batch = torch.randint(0, 2, (num_rois, 1), generator=g).float()
    rois = torch.cat([batch, xy, xy + size], 1)
    rois[0, 1:] = torch.tensor([10.0, 10.0, 10.0 + 112.0, 10.0 + 112.0])  # exactly level 1's lower edge
    rois[1, 1:] = torch.tensor([0.0, 0.0, 500.0, 480.0])  # level 3
    return feats, rois


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("sampling_ratio,pool_mode,aligned", [(0, "avg", True), (2, "avg", False), (2, "max", True)])
def test_multi_level_roi_align(exporter, sampling_ratio, pool_mode, aligned):
    """One RoiAlign per level, then each roi's row by its mmdet level (Where)."""
    scales = [1 / 4, 1 / 8, 1 / 16, 1 / 32]

    def fn(f0, f1, f2, f3, rois):
        return ops.multi_level_roi_align([f0, f1, f2, f3], rois, [3, 3], scales, sampling_ratio, pool_mode, aligned, 56)

    feats, rois = _fpn_inputs(24, 26)
    levels = torch.floor(torch.log2(((rois[:, 3] - rois[:, 1]) * (rois[:, 4] - rois[:, 2])).sqrt() / 56 + 1e-6))
    assert set(levels.clamp(0, 3).tolist()) == {0.0, 1.0, 2.0, 3.0}
    other = (*feats, _fpn_inputs(9, 27)[1])
    names = ["f0", "f1", "f2", "f3", "rois"]
    model = check(fn, (*feats, rois), exporter, names, "RoiAlign", dict(atol=1e-5, rtol=1e-5), {"rois": [0]}, other)
    assert run(model, names, (*feats, rois[:0]))[0].shape == (0, 3, 3, 3)


# --------------------------------------------------------------------------- roi_pool


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_roi_pool(exporter):
    def fn(x, rois):
        return ops.roi_pool(x, rois, [3, 2], 0.5)

    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 3, 10, 9, generator=g)
    rois = random_rois(9, 2, 10, 9, spatial_scale=0.5, extra=False, generator=g)
    # corners at exact halves: both round half away from zero
    halves = torch.tensor([[0, 0.5, 1.5, 7.5, 9.5], [1, 3.0, 5.0, 13.0, 11.0], [0, -1.0, -3.0, 21.0, 3.0]])
    rois = torch.cat([rois, halves])
    other = random_rois(4, 2, 10, 9, spatial_scale=0.5, extra=False, generator=g)
    model = check(fn, (x, rois), exporter, ["x", "rois"], "MaxRoiPool", dict(atol=0, rtol=0), {"rois": [0]}, (x, other))
    assert run(model, ["x", "rois"], (x, rois[:0]))[0].shape == (0, 3, 3, 2)


# --------------------------------------------------------------------------- nms


def _boxes(n, seed, dtype=torch.float32, levels=None):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g, dtype=torch.float64) * 30
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * 12
    scores = torch.rand(n, generator=g, dtype=torch.float64)
    if levels:  # few distinct scores: many ties
        scores = torch.randint(0, levels, (n,), generator=g).double() / levels
    return torch.cat([xy, xy + wh], 1).to(dtype), scores.to(dtype)


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("levels", [None, 3])
def test_nms(exporter, levels):
    def fn(boxes, scores):
        return ops.nms(boxes, scores, 0.4)

    dyn = {"boxes": [0], "scores": [0]}
    check(fn, _boxes(40, 7, levels=levels), exporter, ["boxes", "scores"], "NonMaxSuppression", {}, dyn, _boxes(25, 8))


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_nms_threshold_is_strict_and_empty(exporter):
    """IoU exactly at the threshold does not suppress (both: iou > thr); no boxes -> no indices."""
    boxes = torch.tensor([[0.0, 0.0, 4.0, 1.0], [0.0, 0.0, 2.0, 1.0], [0.0, 0.0, 4.0, 1.0]])
    scores = torch.tensor([0.9, 0.8, 0.7])

    def fn(boxes, scores):
        return ops.nms(boxes, scores, 0.5)

    assert fn(boxes, scores).tolist() == [0, 1]
    dyn = {"boxes": [0], "scores": [0]}
    empty = (torch.zeros(0, 4), torch.zeros(0))
    check(fn, (boxes, scores), exporter, ["boxes", "scores"], "NonMaxSuppression", {}, dyn, empty)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_nms_wrapper_with_offset_and_float64(exporter):
    """mmops.nms (mmcv's wrapper, offset 1 as a box shift) on float64 boxes."""

    def fn(boxes, scores):
        return mmops.nms(boxes, scores, 0.3, offset=1)[1]

    check(fn, _boxes(30, 9, torch.float64), exporter, ["boxes", "scores"], "NonMaxSuppression", {})


def test_nms_threshold_outside_unit_interval_is_an_export_error():
    with pytest.raises(Exception, match="iou_threshold must be in"):
        export(lambda b, s: ops.nms(b, s, 1.5), _boxes(5, 10), "torchscript", ["boxes", "scores"])


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("levels", [None, 2])
def test_batched_nms(exporter, levels):
    def fn(boxes, scores, idxs):
        return ops.batched_nms(boxes, scores, idxs, 0.3)

    def inputs(n, seed):
        boxes, scores = _boxes(n, seed, levels=levels)
        # sparse, negative and repeated category ids
        idxs = torch.tensor([-3, 7, 1000, 7])[torch.randint(0, 4, (n,), generator=torch.Generator().manual_seed(seed))]
        return boxes, scores, idxs

    dyn = {"boxes": [0], "scores": [0], "idxs": [0]}
    names = ["boxes", "scores", "idxs"]
    empty = (torch.zeros(0, 4), torch.zeros(0), torch.zeros(0, dtype=torch.long))
    model = check(fn, inputs(50, 11), exporter, names, "NonMaxSuppression", {}, dyn, inputs(20, 12))
    torch.testing.assert_close(run(model, names, empty)[0], fn(*empty))


def test_documented_nan_deviations():
    """docs/onnx.md: onnxruntime's MaxRoiPool skips NaN (mmops propagates it); the
    batched graph drops -inf / NaN scores (mmops keeps them last)."""
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    x[0, 0, 1, 1] = float("nan")
    rois = torch.tensor([[0.0, 0.0, 0.0, 3.0, 3.0]])
    pool = lambda x, r: ops.roi_pool(x, r, [1, 1], 1.0)
    assert run(export(pool, (x, rois), "torchscript", ["x", "rois"]), ["x", "rois"], (x, rois))[0].item() == 15.0
    assert pool(x, rois).isnan().all()
    boxes = torch.tensor([[0, 0, 1, 1.0], [5, 5, 6, 6], [10, 10, 11, 11], [20, 20, 21, 21]])
    args = (boxes, torch.tensor([0.5, float("nan"), float("-inf"), 0.7]), torch.tensor([0, 0, 1, 1]))
    names = ["boxes", "scores", "idxs"]
    fn = lambda b, s, i: ops.batched_nms(b, s, i, 0.5)
    assert run(export(fn, args, "torchscript", names), names, args)[0].tolist() == [3, 0]
    assert fn(*args).tolist() == [3, 0, 2, 1]


# --------------------------------------------------------------------------- deformable convolutions


def _deform_inputs(seed, groups, deform_groups, stride, padding, dilation, big_offsets=False):
    g = torch.Generator().manual_seed(seed)
    n, cin, cout, h, w, k = 2, 4, 6, 7, 8, 3
    oh = (h + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    ow = (w + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    x = torch.randn(n, cin, h, w, generator=g)
    offset = torch.randn(n, 2 * deform_groups * k * k, oh, ow, generator=g) * (6.0 if big_offsets else 1.5)
    mask = torch.rand(n, deform_groups * k * k, oh, ow, generator=g)
    weight = torch.randn(cout, cin // groups, k, k, generator=g)
    bias = torch.randn(cout, generator=g)
    return x, offset, mask, weight, bias


DEFORM_CASES = [(1, 1, 1, 0, 1, False), (2, 2, 2, 1, 1, True), (1, 4, 1, 2, 2, True)]


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("groups,deform_groups,stride,padding,dilation,big", DEFORM_CASES)
def test_deform_conv2d(exporter, groups, deform_groups, stride, padding, dilation, big):
    x, offset, _, weight, bias = _deform_inputs(13, groups, deform_groups, stride, padding, dilation, big)
    conf = ([stride] * 2, [padding] * 2, [dilation] * 2, groups, deform_groups)

    def fn(x, offset):
        return ops.deform_conv2d(x, offset, weight, bias if groups == 2 else None, *conf)

    check(fn, (x, offset), exporter, ["x", "offset"], "DeformConv", dict(atol=1e-4, rtol=1e-4))


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("groups,deform_groups,stride,padding,dilation,big", DEFORM_CASES)
def test_modulated_deform_conv2d(exporter, groups, deform_groups, stride, padding, dilation, big):
    x, offset, mask, weight, bias = _deform_inputs(14, groups, deform_groups, stride, padding, dilation, big)
    conf = ([stride] * 2, [padding] * 2, [dilation] * 2, groups, deform_groups)

    def fn(x, offset, mask):
        return ops.modulated_deform_conv2d(x, offset, mask, weight, bias if groups != 2 else None, *conf)

    names = ["x", "offset", "mask"]
    check(fn, (x, offset, mask), exporter, names, "DeformConv", dict(atol=1e-4, rtol=1e-4))


@needs_onnxscript
def test_deform_conv_module_dynamic_batch():
    """mmops.ModulatedDeformConv2dPack-style module with a dynamic batch (dynamo)."""
    x, offset, mask, weight, bias = _deform_inputs(15, 1, 1, 1, 1, 1)

    def fn(x, offset, mask):
        return ops.modulated_deform_conv2d(x, offset, mask, weight, bias, [1, 1], [1, 1], [1, 1], 1, 1)

    other = tuple(t[:1] for t in (x, offset, mask))
    dyn = {"x": [0], "offset": [0], "mask": [0]}
    check(
        fn, (x, offset, mask), "dynamo", ["x", "offset", "mask"], "DeformConv", dict(atol=1e-4, rtol=1e-4), dyn, other
    )


# --------------------------------------------------------------------------- composites


def _box_sets(m, n, seed):
    """Two box sets with a NaN, an Inf, a reversed and a zero-size box among them."""
    g = torch.Generator().manual_seed(seed)
    xy1, xy2 = torch.rand(m, 2, generator=g) * 10, torch.rand(n, 2, generator=g) * 10
    b1 = torch.cat([xy1, xy1 + torch.rand(m, 2, generator=g) * 6], 1)
    b2 = torch.cat([xy2, xy2 + torch.rand(n, 2, generator=g) * 6], 1)
    if m >= 4:
        b1[0, 1], b1[1, 2] = float("nan"), float("inf")
        b1[2], b1[3] = torch.tensor([6.0, 6.0, 2.0, 2.0]), torch.tensor([4.0, 4.0, 4.0, 4.0])
    return b1, b2


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize(
    "mode,aligned,offset", [("iou", False, 0), ("iof", False, 1), ("iou", True, 1), ("iof", True, 0)]
)
def test_bbox_overlaps(exporter, mode, aligned, offset):
    """A composite of elementwise ops in mmops' operation order: equal to the bit (float32)."""

    def fn(b1, b2):
        return ops.bbox_overlaps(b1, b2, mode, aligned, offset)

    n = 7 if aligned else 5
    dyn = {"b1": [0], "b2": [0]}
    other = _box_sets(4, 4 if aligned else 9, 21)
    model = check(fn, _box_sets(7, n, 20), exporter, ["b1", "b2"], "Div", dict(atol=0, rtol=0), dyn, other)
    empty = (torch.zeros(0, 4), torch.zeros(0 if aligned else 3, 4))
    assert run(model, ["b1", "b2"], empty)[0].shape == fn(*empty).shape


def _msda_inputs(batch, queries, seed):
    g = torch.Generator().manual_seed(seed)
    shapes = torch.tensor([[4, 5], [2, 3], [1, 1]])
    starts = torch.tensor([0, 20, 26])
    heads, channels, points = 2, 3, 2
    value = torch.randn(batch, 27, heads, channels, generator=g)
    # locations also outside [0, 1]: zero padding
    loc = torch.rand(batch, queries, heads, 3, points, 2, generator=g) * 1.4 - 0.2
    attn = torch.rand(batch, queries, heads, 3, points, generator=g)
    return value, shapes, starts, loc, attn


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_ms_deform_attn(exporter):
    """GridSample per level (mmcv's PyTorch path), dynamic batch and query counts."""
    fn = ops.ms_deform_attn
    names = ["value", "spatial_shapes", "level_start_index", "loc", "attn"]
    dyn = {"value": [0], "loc": [0, 1], "attn": [0, 1]}
    tol = dict(atol=1e-5, rtol=1e-5)
    model = check(fn, _msda_inputs(2, 5, 22), exporter, names, "GridSample", tol, dyn, _msda_inputs(3, 7, 23))
    empty = _msda_inputs(1, 0, 24)
    assert run(model, names, empty)[0].shape == fn(*empty).shape


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_ms_deform_attn_module(exporter):
    """mmops.MultiScaleDeformableAttention (mmcv's module) exports whole."""
    torch.manual_seed(25)
    attn = mmops.MultiScaleDeformableAttention(embed_dims=8, num_heads=2, num_levels=2, num_points=2, batch_first=True)
    attn.eval()
    shapes = torch.tensor([[4, 4], [2, 2]])
    starts = torch.tensor([0, 16])
    query, value = torch.randn(1, 6, 8), torch.randn(1, 20, 8)
    ref = torch.rand(1, 6, 2, 2)

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = attn

        def forward(self, query, value, ref):
            return self.attn(query, value=value, reference_points=ref, spatial_shapes=shapes, level_start_index=starts)

    fn = Layer().eval()
    with torch.no_grad():
        check(fn, (query, value, ref), exporter, ["query", "value", "ref"], "GridSample", dict(atol=1e-5, rtol=1e-5))


def _focal_inputs(n, seed, background):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, 5, generator=g) * 4
    if n:
        logits[0] = torch.tensor([30.0, -30.0, 0.0, 12.0, -12.0])  # saturated sigmoid / softmax
    return logits, torch.randint(0, 6 if background else 5, (n,), generator=g), torch.rand(5, generator=g) + 0.5


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("reduction,weighted", [("none", True), ("mean", False), ("sum", True)])
@pytest.mark.parametrize("loss", ["sigmoid", "softmax"])
def test_focal_losses(exporter, reduction, weighted, loss):
    """Elementwise composites (log-sigmoid as -Softplus, LogSoftmax), dynamic N, empty N."""
    op = ops.sigmoid_focal_loss if loss == "sigmoid" else ops.softmax_focal_loss
    names = ["input", "target", "weight"] if weighted else ["input", "target"]

    def fn(input, target, weight=None):
        return op(input, target, 1.5, 0.3, weight, reduction)

    def inputs(n, seed):
        a = _focal_inputs(n, seed, loss == "sigmoid")
        return a if weighted else a[:2]

    tol = dict(atol=1e-5, rtol=1e-5)
    dyn = {"input": [0], "target": [0]}
    onnx_op = "Softplus" if loss == "sigmoid" else "LogSoftmax"
    model = check(fn, inputs(9, 28), exporter, names, onnx_op, tol, dyn, inputs(4, 29))
    empty = inputs(0, 30)
    torch.testing.assert_close(run(model, names, empty)[0], fn(*empty), equal_nan=True)


# --------------------------------------------------------------------------- custom-domain fallbacks


def _custom_cases():
    boxes, scores = _boxes(8, 16)
    x, rois = _roi_inputs(5, 17)
    return {
        "MultiLevelRoIAlign": (
            lambda x, r: ops.multi_level_roi_align(
                [x, x[:, :, ::2, ::2]], r, [2, 2], [0.25, 0.125], 0, "max", True, 56
            ),
            (x, rois),
        ),
        "SoftNMS": (lambda b, s: ops.soft_nms(b, s, 0.3, 0.5, 1e-3, "gaussian"), (boxes, scores)),
    }


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("name", sorted(_custom_cases()))
def test_custom_domain_fallbacks(exporter, name):
    fn, args = _custom_cases()[name]
    fn(*args)  # the eager op accepts these inputs
    names = [f"in{i}" for i in range(len(args))]
    model = export(fn, args, exporter, names)
    types = op_types(model)
    assert ("mmops", name) in types, types
    assert f"mmops::{name}" in mmops.onnx.CUSTOM_OPS.values()
    assert any(o.domain == "mmops" and o.version == 1 for o in model.opset_import)
    node = next(n for n in model.graph.node if n.op_type == name)
    assert len(node.output) == (2 if name == "SoftNMS" else 1)


# --------------------------------------------------------------------------- registration


@needs_onnxscript
def test_export_helper_passes_the_table():
    """mmops.onnx.export: the explicit table (dynamo) / declared custom domain (TorchScript)."""
    table = mmops.onnx.translation_table()
    assert ops.roi_align.default in table and ops._roi_align_forward.default in table
    x, rois = _roi_inputs(3, 19)
    head = mmops.RoIAlign(2, 0.25, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = mmops.onnx.export(head, (x, rois), dynamo=True)
        f = io.BytesIO()
        mmops.onnx.export(mmops.RoIAlign(2, 0.25, 0, "max"), (x, rois), f, dynamo=False, opset_version=17)
    torch.testing.assert_close(run(prog.model_proto, ["input", "rois"], (x, rois))[0], head(x, rois))
    model = onnx.load_from_string(f.getvalue())
    assert ("mmops", "RoIAlignMax") in op_types(model)
    assert any(o.domain == "mmops" and o.version == 1 for o in model.opset_import)


def test_import_mmops_does_not_import_onnx():
    import subprocess
    import sys

    code = "import sys, mmops; assert 'onnxscript' not in sys.modules and 'onnx' not in sys.modules; print('ok')"
    package_root = os.path.dirname(os.path.dirname(mmops.__file__))
    env = dict(os.environ, MMOPS_LIBRARY=mmops.library_path)
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.strip() == "ok", out.stderr
