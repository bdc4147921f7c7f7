"""ONNX export of the mmops ops, for both torch.onnx exporters (docs/onnx.md).

``import mmops.onnx`` registers everything once:

- the TorchScript exporter (``torch.onnx.export(..., dynamo=False)``): symbolic
  functions through ``torch.onnx.register_custom_op_symbolic``;
- the dynamo exporter (``dynamo=True``, torch's default): onnxscript functions
  in onnxscript's torchlib registry, which torch.onnx reads on every export.
  That registry is not a public torch API, so :func:`export` (and
  :func:`translation_table` for ``custom_translation_table=``) is the stable way.

It is not imported by ``import mmops``: onnxscript takes seconds to import and
is optional, and torch.onnx has no public hook to register lazily.

Standard ONNX ops where the semantics match (RoiAlign, MaxRoiPool,
NonMaxSuppression, DeformConv, GridSample, and composites of plain ops);
nodes of the custom domain ``mmops`` (version 1) where they do not: soft_nms and
max pooling with an adaptive grid. Those need a runtime that implements them.
"""

import math
from typing import Any, Callable, Dict, Optional

import torch
from torch.onnx import register_custom_op_symbolic
from torch.onnx import symbolic_helper as sh

__all__ = ["DOMAIN", "export", "translation_table", "CUSTOM_OPS"]

DOMAIN = "mmops"
_INT64_MAX = 2**63 - 1
_FLOAT_LOWEST = -3.4028234663852886e38
# custom-domain node of each op that has no exact standard mapping
CUSTOM_OPS = {
    "roi_align (max, sampling_ratio=0)": "mmops::RoIAlignMax",
    "multi_level_roi_align (max, sampling_ratio=0)": "mmops::MultiLevelRoIAlign",
    "soft_nms": "mmops::SoftNMS",
}


def _check_nms_threshold(iou_threshold: float) -> None:
    # ONNX NonMaxSuppression rejects thresholds outside [0, 1] at run time.
    if not 0.0 <= iou_threshold <= 1.0:
        raise ValueError(f"mmops.onnx: nms iou_threshold must be in [0, 1] for ONNX, got {iou_threshold}")


def _check_pool_mode(pool_mode: str) -> None:
    if pool_mode not in ("avg", "max"):
        raise ValueError(f"mmops.onnx: roi_align pool_mode must be 'avg' or 'max', got {pool_mode!r}")


# --------------------------------------------------------------------------
# The graphs, written once for both exporters against a builder b:
# b(op_name, *inputs, outputs=1, **attributes), b.custom(...) (domain mmops),
# b.ints / b.floats (int64 / float32 constants), b.float_like(value, tensor),
# b.none() (an omitted optional input), b.static_dim(value, i), b.opset.
# --------------------------------------------------------------------------

_FLOAT, _INT64 = 1, 7  # onnx.TensorProto data types


def _roi_align_graph(b, input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned):
    _check_pool_mode(pool_mode)
    ph, pw = (int(v) for v in output_size)
    scale, sr = float(spatial_scale), int(sampling_ratio)
    if pool_mode == "max" and sr <= 0:
        attrs = dict(output_height=ph, output_width=pw, spatial_scale=scale, sampling_ratio=sr)
        return b.custom("RoIAlignMax", input, rois, aligned=int(aligned), **attrs)

    def cols(start, end):
        return b("Slice", rois, b.ints([start]), b.ints([end]), b.ints([1]))

    batch = b("Cast", b("Squeeze", cols(0, 1), b.ints([1])), to=_INT64)
    lo, hi = cols(1, 3), cols(3, 5)
    if aligned and sr <= 0:
        # A reversed box (x2 < x1) pools zeros in mmcv (an empty adaptive grid) but
        # overflows onnxruntime's grid size; x2, y2 >= x1, y1 gives the same zeros.
        hi = b("Max", lo, hi)
    # max: one centre sample per sub-bin of a grid sampling_ratio times finer, then
    # MaxPool: the max of the bilinear samples, as mmcv (ONNX's own max mode differs).
    s = sr if pool_mode == "max" else 1
    out = b(
        "RoiAlign",
        input,
        b("Concat", lo, hi, axis=1),
        batch,
        coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
        mode="avg",
        output_height=ph * s,
        output_width=pw * s,
        sampling_ratio=sr if pool_mode == "avg" else 1,
        spatial_scale=scale,
    )
    return b("MaxPool", out, kernel_shape=[s, s], strides=[s, s]) if pool_mode == "max" else out


def _roi_pool_graph(b, input, rois, output_size, spatial_scale):
    pooled = [int(v) for v in output_size]
    return b("MaxRoiPool", input, rois, pooled_shape=pooled, spatial_scale=float(spatial_scale))


def _nms_inputs(b, boxes, scores):
    return b("Unsqueeze", b("Cast", boxes, to=_FLOAT), b.ints([0])), b("Cast", scores, to=_FLOAT)


def _nms_graph(b, boxes, scores, iou_threshold):
    _check_nms_threshold(iou_threshold)
    bx, s = _nms_inputs(b, boxes, scores)
    limits = (b.ints([_INT64_MAX]), b.floats([float(iou_threshold)]))
    sel = b("NonMaxSuppression", bx, b("Unsqueeze", s, b.ints([0, 1])), *limits, center_point_box=0)
    return b("Gather", sel, b.ints(2), axis=1)


def _batched_nms_graph(b, boxes, scores, idxs, iou_threshold):
    """One NMS class per category (ids made dense by Unique; -inf elsewhere, dropped by the
    lowest-float score threshold), then by index and a stable sort by decreasing score."""
    _check_nms_threshold(iou_threshold)
    bx, s = _nms_inputs(b, boxes, scores)
    inverse = b("Unique", b("Reshape", idxs, b.ints([-1])), sorted=1, outputs=4)[2]
    one = b.ints(1)
    classes = b("Range", b.ints(0), b("Add", b("ReduceMax", inverse, keepdims=0), one), one)
    member = b("Equal", b("Unsqueeze", classes, b.ints([1])), b("Unsqueeze", inverse, b.ints([0])))
    per_class = b("Unsqueeze", b("Where", member, s, b.floats(-math.inf)), b.ints([0]))
    limits = (b.ints([_INT64_MAX]), b.floats([float(iou_threshold)]), b.floats([_FLOAT_LOWEST]))
    sel = b("NonMaxSuppression", bx, per_class, *limits, center_point_box=0)
    kept = b("Gather", sel, b.ints(2), axis=1)
    k = b("Shape", kept)
    kept = b("TopK", kept, k, largest=0, sorted=1, outputs=2)[0]
    order = b("TopK", b("Gather", s, kept, axis=0), k, largest=1, sorted=1, outputs=2)[1]
    return b("Gather", kept, order, axis=0)


def _deform_conv_graph(b, input, offset, mask, weight, bias, stride, padding, dilation, groups, deform_groups):
    inputs = [input, weight, offset]
    if bias is not None or mask is not None:
        inputs.append(b.none() if bias is None else bias)
    if mask is not None:
        inputs.append(mask)
    return b(
        "DeformConv",
        *inputs,
        dilations=[int(v) for v in dilation],
        group=int(groups),
        offset_group=int(deform_groups),
        pads=[int(v) for v in padding] * 2,
        strides=[int(v) for v in stride],
    )


def _multi_level_roi_align_graph(b, features, rois, output_size, scales, sampling_ratio, pool_mode, aligned, fs):
    if pool_mode == "max" and sampling_ratio <= 0:
        attrs = dict(spatial_scales=[float(v) for v in scales], sampling_ratio=int(sampling_ratio), pool_mode=pool_mode)
        size = dict(output_height=int(output_size[0]), output_width=int(output_size[1]))
        return b.custom(
            "MultiLevelRoIAlign", rois, *features, aligned=int(aligned), finest_scale=int(fs), **size, **attrs
        )
    per_level = [
        _roi_align_graph(b, m, rois, output_size, scale, sampling_ratio, pool_mode, aligned)
        for m, scale in zip(features, scales)
    ]
    return _fpn_select(b, rois, per_level, fs)


def _soft_nms_graph(b, boxes, scores, iou_threshold, sigma, min_score, method):
    attrs = dict(iou_threshold=float(iou_threshold), sigma=float(sigma), min_score=float(min_score))
    return b.custom("SoftNMS", boxes, scores, outputs=2, method=method, **attrs)


def _bbox_overlaps_graph(b, bboxes1, bboxes2, mode, aligned, offset):
    """mmops' overlap formula (kernels/common/box_iou.h) in the same operation order."""
    if mode not in ("iou", "iof"):
        raise ValueError(f"mmops.onnx: bbox_overlaps mode must be 'iou' or 'iof', got {mode!r}")
    off, zero = b.float_like(float(offset), bboxes1), b.float_like(0.0, bboxes1)

    def columns(boxes, transpose):  # x1, y1, x2, y2 as [M, 1], or [1, N] for the pairwise second set
        cols = [b("Slice", boxes, b.ints([i]), b.ints([i + 1]), b.ints([1])) for i in range(4)]
        return [b("Transpose", c, perm=[1, 0]) for c in cols] if transpose else cols

    def finite(boxes, transpose):  # x - x is 0 for every finite coordinate, NaN otherwise
        ok = b("Equal", b("ReduceSum", b("Sub", boxes, boxes), b.ints([1]), keepdims=1), zero)
        return b("Transpose", ok, perm=[1, 0]) if transpose else ok

    def area(p):
        return b("Mul", b("Add", b("Sub", p[2], p[0]), off), b("Add", b("Sub", p[3], p[1]), off))

    p, q = columns(bboxes1, False), columns(bboxes2, not aligned)
    w = b("Max", b("Add", b("Sub", b("Min", p[2], q[2]), b("Max", p[0], q[0])), off), zero)
    h = b("Max", b("Add", b("Sub", b("Min", p[3], q[3]), b("Max", p[1], q[1])), off), zero)
    inter = b("Mul", w, h)
    base = area(p) if mode == "iof" else b("Sub", b("Add", area(p), area(q)), inter)
    base = b("Max", base, off)
    ok = b("And", b("And", finite(bboxes1, False), finite(bboxes2, not aligned)), b("Greater", base, zero))
    out = b("Where", ok, b("Div", inter, base), zero)
    return b("Reshape", out, b.ints([-1])) if aligned else out


def _ms_deform_attn_graph(b, value, spatial_shapes, level_start_index, loc, attn):
    """mmcv's multi_scale_deformable_attn_pytorch: GridSample per level (zeros outside,
    align_corners 0), times the weights, summed over levels and points."""
    num_levels = b.static_dim(loc, 3)
    if num_levels is None:
        raise ValueError("mmops.onnx: ms_deform_attn needs sampling_locations with a static level count")
    gs_mode = "linear" if b.opset >= 20 else "bilinear"  # GridSample-20 renamed the mode

    def reshape(x, *dims):  # allowzero: an empty batch or query count is a size, not "copy"
        return b("Reshape", x, b("Concat", *dims, axis=0), allowzero=1)

    def dim(shape, i):
        return b("Slice", shape, b.ints([i]), b.ints([i + 1]))

    vshape, lshape = b("Shape", value), b("Shape", loc)  # [B, S, M, D], [B, Q, M, L, P, 2]
    batch, heads, channels = dim(vshape, 0), dim(vshape, 2), dim(vshape, 3)
    queries, points = dim(lshape, 1), dim(lshape, 4)
    bm = b("Mul", batch, heads)
    shapes = b("Cast", spatial_shapes, to=_INT64)
    starts = b("Cast", level_start_index, to=_INT64)
    v = b("Transpose", value, perm=[0, 2, 3, 1])  # [B, M, D, S]
    one = b.float_like(1.0, loc)
    grid = b("Transpose", b("Sub", b("Add", loc, loc), one), perm=[0, 2, 1, 3, 4, 5])  # [B, M, Q, L, P, 2]
    samples = []
    for lvl in range(num_levels):
        hw = b("Gather", shapes, b.ints(lvl), axis=0)
        start = b("Gather", starts, b.ints([lvl]), axis=0)
        end = b("Add", start, b("Mul", b("Gather", hw, b.ints(0)), b("Gather", hw, b.ints(1))))
        v_l = b("Slice", v, start, end, b.ints([3]))
        v_l = reshape(v_l, bm, channels, hw)  # [B * M, D, H, W]
        g_l = b("Gather", grid, b.ints(lvl), axis=3)
        g_l = reshape(g_l, bm, queries, points, b.ints([2]))  # [B * M, Q, P, 2]
        samples.append(b("GridSample", v_l, g_l, align_corners=0, mode=gs_mode, padding_mode="zeros"))
    stacked = b("Concat", *samples, axis=3)  # [B * M, D, Q, L * P]
    lp = b("Mul", points, b.ints([num_levels]))
    w = b("Transpose", attn, perm=[0, 2, 1, 3, 4])  # [B, M, Q, L, P]
    w = reshape(w, bm, b.ints([1]), queries, lp)
    out = b("ReduceSum", b("Mul", stacked, w), b.ints([3]), keepdims=0)  # [B * M, D, Q]
    out = b("Transpose", reshape(out, batch, heads, channels, queries), perm=[0, 3, 1, 2])
    return reshape(out, batch, queries, b("Mul", heads, channels))


def _fpn_select(b, rois, per_level, finest_scale):
    """multi_level_roi_align from per-level results: each roi's row from the map of its mmdet
    level floor(log2(sqrt(w * h) / finest_scale + 1e-6)), clamped; level 0 for NaN."""
    if len(per_level) == 1:
        return per_level[0]
    cols = [b("Slice", rois, b.ints([i]), b.ints([i + 1]), b.ints([1])) for i in range(1, 5)]
    area = b("Mul", b("Sub", cols[2], cols[0]), b("Sub", cols[3], cols[1]))
    scale = b("Div", b("Sqrt", area), b.float_like(float(finest_scale), rois))
    log = b("Log", b("Add", scale, b.float_like(1e-6, rois)))
    level = b("Floor", b("Div", log, b.float_like(math.log(2.0), rois)))  # [K, 1]
    out = per_level[0]
    for lvl in range(1, len(per_level)):
        at = b.float_like(float(lvl), rois)
        # the last level takes every level above it; NaN compares false: level 0
        picked = b("GreaterOrEqual" if lvl == len(per_level) - 1 else "Equal", level, at)
        mask = b("Reshape", picked, b.ints([-1, 1, 1, 1]))
        out = b("Where", mask, per_level[lvl], out)
    return out


def _reduce_loss(b, loss, reduction):
    if reduction == "none":
        return loss
    if reduction not in ("mean", "sum"):
        raise ValueError(f"mmops.onnx: focal loss reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    total = b("ReduceSum", loss, keepdims=0)
    if reduction == "sum":
        return total
    rows = b("CastLike", b("Gather", b("Shape", loss), b.ints(0)), loss)
    return b("Div", total, rows)  # mmcv: sum / N (rows); no rows: 0 / 0 = NaN, as torch.mean


def _row_weight(b, weight, target, like):
    """weight[target] as [N, 1]; 1 for the background class C (sigmoid) when weight is given."""
    padded = b("Concat", weight, b("Reshape", b.float_like(1.0, like), b.ints([1])), axis=0)
    return b("Unsqueeze", b("Gather", padded, target, axis=0), b.ints([1]))


def _sigmoid_focal_loss_graph(b, input, target, gamma, alpha, weight, reduction):
    """-alpha (1 - p)^gamma log p at the target class, -(1 - alpha) p^gamma log(1 - p)
    elsewhere; log p = -softplus(-x), log(1 - p) = -softplus(x) (stable log-sigmoids)."""
    p = b("Sigmoid", input)
    one, g = b.float_like(1.0, input), b.float_like(float(gamma), input)
    classes = b("Range", b.ints(0), b("Gather", b("Shape", input), b.ints(1)), b.ints(1))
    positive = b(
        "Equal", b("Unsqueeze", b("Cast", target, to=_INT64), b.ints([1])), b("Unsqueeze", classes, b.ints([0]))
    )
    pos = b(
        "Mul",
        b("Mul", b.float_like(float(alpha), input), b("Pow", b("Sub", one, p), g)),
        b("Softplus", b("Neg", input)),
    )
    neg = b("Mul", b("Mul", b.float_like(1.0 - float(alpha), input), b("Pow", p, g)), b("Softplus", input))
    loss = b("Where", positive, pos, neg)
    if weight is not None:
        loss = b("Mul", loss, _row_weight(b, weight, b("Cast", target, to=_INT64), input))
    return _reduce_loss(b, loss, reduction)


def _softmax_focal_loss_graph(b, input, target, gamma, alpha, weight, reduction):
    """-alpha (1 - p)^gamma log p per row, p the softmax at the target, log p from LogSoftmax."""
    t = b("Unsqueeze", b("Cast", target, to=_INT64), b.ints([1]))
    logp = b("GatherElements", b("LogSoftmax", input, axis=1), t, axis=1)  # [N, 1]
    one, g = b.float_like(1.0, input), b.float_like(float(gamma), input)
    loss = b("Mul", b("Mul", b.float_like(-float(alpha), input), b("Pow", b("Sub", one, b("Exp", logp)), g)), logp)
    if weight is not None:
        loss = b("Mul", loss, b("Unsqueeze", b("Gather", weight, b("Cast", target, to=_INT64), axis=0), b.ints([1])))
    return _reduce_loss(b, b("Reshape", loss, b.ints([-1])), reduction)


def _attr_suffix(value) -> str:
    first = value[0] if isinstance(value, (list, tuple)) else value
    return "s" if isinstance(first, str) else "f" if isinstance(first, float) else "i"


class _TSBuilder:
    """The builder for the TorchScript exporter: g.op, attribute types from the values."""

    def __init__(self, g):
        self.g = g
        self.opset = g.opset

    def __call__(self, name, *inputs, outputs=1, **attrs):
        return self.g.op(name, *inputs, outputs=outputs, **{f"{k}_{_attr_suffix(v)}": v for k, v in attrs.items()})

    def custom(self, name, *inputs, outputs=1, **attrs):
        return self(f"{DOMAIN}::{name}", *inputs, outputs=outputs, **attrs)

    def _const(self, values, dtype):
        return self.g.op("Constant", value_t=torch.tensor(values, dtype=dtype))

    def ints(self, values):
        return self._const(values, torch.int64)

    def floats(self, values):
        return self._const(values, torch.float32)

    def float_like(self, value, like):
        return self.g.op("CastLike", self.floats(value), like)

    def none(self):
        return sh._optional_input_placeholder_tensor(self.g)

    def static_dim(self, value, i):
        sizes = sh._get_tensor_sizes(value)
        return sizes[i] if sizes is not None and len(sizes) > i else None


class _OnnxscriptBuilder:
    """The builder for the dynamo exporter: onnxscript ops (opset 18; DeformConv 19)."""

    opset = 18

    def __init__(self):
        import onnxscript

        self.op, self.op19 = onnxscript.opset18, onnxscript.opset19
        self.mm = onnxscript.values.Opset(DOMAIN, 1)

    def __call__(self, name, *inputs, outputs=1, **attrs):
        result = getattr(self.op19 if name == "DeformConv" else self.op, name)(*inputs, **attrs)
        return result[0] if outputs == 1 and isinstance(result, tuple) else result

    def custom(self, name, *inputs, outputs=1, **attrs):
        return getattr(self.mm, name)(*inputs, **attrs)

    def ints(self, values):
        if isinstance(values, list):
            return self.op.Constant(value_ints=values)
        return self.op.Constant(value_int=values)

    def floats(self, values):
        if isinstance(values, list):
            return self.op.Constant(value_floats=values)
        return self.op.Constant(value_float=values)

    def float_like(self, value, like):
        return self.op.CastLike(self.floats(value), like)

    def none(self):
        return None

    def static_dim(self, value, i):
        dim = value.shape[i] if value.shape is not None and len(value.shape) > i else None
        return dim if isinstance(dim, int) else None


# --------------------------------------------------------------------------
# TorchScript exporter (dynamo=False): symbolic functions
# --------------------------------------------------------------------------


def _ts(graph, *arg_kinds: str) -> Callable:
    """A symbolic: the arguments parsed as arg_kinds (None tensors as None), then graph."""

    def symbolic(g, *args):
        if len(args) != len(arg_kinds):
            raise ValueError(f"mmops.onnx: {graph.__name__} got {len(args)} arguments, expected {len(arg_kinds)}")
        parsed = [
            (None if sh._is_none(a) else a) if k == "v" else sh._get_const(a, k, f"argument {i}")
            for i, (a, k) in enumerate(zip(args, arg_kinds))
        ]
        return graph(_TSBuilder(g), *parsed)

    return symbolic


def _unpacking_features(graph):
    def with_maps(b, features, *args):
        return graph(b, sh._unpack_list(features), *args)

    return with_maps


def _without_mask(graph):
    def no_mask(b, input, offset, weight, *args):
        return graph(b, input, offset, None, weight, *args)

    return no_mask


_TS_SYMBOLICS = {
    "roi_align": (_ts(_roi_align_graph, "v", "v", "is", "f", "i", "s", "b"), 16),
    "roi_pool": (_ts(_roi_pool_graph, "v", "v", "is", "f"), 16),
    "nms": (_ts(_nms_graph, "v", "v", "f"), 16),
    "batched_nms": (_ts(_batched_nms_graph, "v", "v", "v", "f"), 16),
    "deform_conv2d": (_ts(_without_mask(_deform_conv_graph), "v", "v", "v", "v", "is", "is", "is", "i", "i"), 19),
    "modulated_deform_conv2d": (_ts(_deform_conv_graph, "v", "v", "v", "v", "v", "is", "is", "is", "i", "i"), 19),
    "multi_level_roi_align": (
        _ts(_unpacking_features(_multi_level_roi_align_graph), "v", "v", "is", "fs", "i", "s", "b", "i"),
        16,
    ),
    "soft_nms": (_ts(_soft_nms_graph, "v", "v", "f", "f", "f", "s"), 16),
    "bbox_overlaps": (_ts(_bbox_overlaps_graph, "v", "v", "s", "b", "i"), 16),
    "sigmoid_focal_loss": (_ts(_sigmoid_focal_loss_graph, "v", "v", "f", "f", "v", "s"), 16),
    "softmax_focal_loss": (_ts(_softmax_focal_loss_graph, "v", "v", "f", "f", "v", "s"), 16),
    "ms_deform_attn": (_ts(_ms_deform_attn_graph, "v", "v", "v", "v", "v"), 16),
}


def _register_torchscript() -> None:
    for name, (fn, opset) in _TS_SYMBOLICS.items():
        register_custom_op_symbolic(f"mmops::{name}", fn, opset)


# --------------------------------------------------------------------------
# dynamo exporter (dynamo=True): onnxscript functions
# --------------------------------------------------------------------------


_FLOATS = ["tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"]
# name: (inputs as (name, type, "" / "variadic"), outputs, attributes as name: kind)
_CUSTOM_SCHEMAS = {
    "RoIAlignMax": (
        [("X", "T", ""), ("rois", "T", "")],
        [("Y", "T")],
        dict(output_height="i", output_width="i", spatial_scale="f", sampling_ratio="i", aligned="i"),
    ),
    "MultiLevelRoIAlign": (
        [("rois", "T", ""), ("features", "T", "variadic")],
        [("Y", "T")],
        dict(
            output_height="i",
            output_width="i",
            spatial_scales="fs",
            sampling_ratio="i",
            pool_mode="s",
            aligned="i",
            finest_scale="i",
        ),
    ),
    "SoftNMS": (
        [("boxes", "T", ""), ("scores", "T2", "")],
        [("dets", "T"), ("keep", "tensor(int64)")],
        dict(iou_threshold="f", sigma="f", min_score="f", method="s"),
    ),
}


def _register_custom_schemas() -> None:
    """Declares the mmops-domain ops to onnx (onnxscript builds nodes from schemas)."""
    import onnx

    S = onnx.defs.OpSchema
    attr_types = {"i": S.AttrType.INT, "f": S.AttrType.FLOAT, "s": S.AttrType.STRING, "fs": S.AttrType.FLOATS}
    option = {"": S.FormalParameterOption.Single, "variadic": S.FormalParameterOption.Variadic}
    for name, (inputs, outputs, attrs) in _CUSTOM_SCHEMAS.items():
        if onnx.defs.has(name, DOMAIN):
            continue
        schema = S(
            name,
            DOMAIN,
            1,
            f"mmops::{name}: the mmops op of that name (docs/onnx.md); needs a runtime that implements it.",
            inputs=[S.FormalParameter(n, t, param_option=option[o]) for n, t, o in inputs],
            outputs=[S.FormalParameter(n, t) for n, t in outputs],
            type_constraints=[(t, _FLOATS, "floating point") for t in ("T", "T2") if t in {x[1] for x in inputs}],
            attributes=[S.Attribute(n, attr_types[k], n) for n, k in attrs.items()],
        )
        onnx.defs.register_schema(schema)


def _dynamo_functions() -> Dict[Any, Callable]:
    """{OpOverload: function} for the ops as they appear in an exported graph: the
    public ops and the _*_forward helpers the export decomposes some into (their
    second output, argmax, is unused there). The exporter reads the signatures."""
    _register_custom_schemas()
    b = _OnnxscriptBuilder()

    def roi_align(input, rois, output_size, spatial_scale=1.0, sampling_ratio=0, pool_mode="avg", aligned=True):
        return _roi_align_graph(b, input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned)

    def roi_align_forward(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned):
        out = roi_align(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned)
        return out, b("Shape", out)

    def roi_pool(input, rois, output_size, spatial_scale=1.0):
        return _roi_pool_graph(b, input, rois, output_size, spatial_scale)

    def roi_pool_forward(input, rois, output_size, spatial_scale):
        out = roi_pool(input, rois, output_size, spatial_scale)
        return out, b("Shape", out)

    def nms(boxes, scores, iou_threshold):
        return _nms_graph(b, boxes, scores, iou_threshold)

    def batched_nms(boxes, scores, idxs, iou_threshold):
        return _batched_nms_graph(b, boxes, scores, idxs, iou_threshold)

    def deform_conv2d(
        input, offset, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, deform_groups=1
    ):
        return _deform_conv_graph(
            b, input, offset, None, weight, bias, stride, padding, dilation, groups, deform_groups
        )

    def modulated_deform_conv2d(
        input,
        offset,
        mask,
        weight,
        bias=None,
        stride=(1, 1),
        padding=(0, 0),
        dilation=(1, 1),
        groups=1,
        deform_groups=1,
    ):
        return _deform_conv_graph(
            b, input, offset, mask, weight, bias, stride, padding, dilation, groups, deform_groups
        )

    def multi_level_roi_align(
        features, rois, output_size, spatial_scales, sampling_ratio=0, pool_mode="avg", aligned=True, finest_scale=56
    ):
        args = (output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale)
        return _multi_level_roi_align_graph(b, features, rois, *args)

    def multi_level_roi_align_forward(
        features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale
    ):
        args = (output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale)
        out = _multi_level_roi_align_graph(b, features, rois, *args)
        return out, b("Shape", out)

    def soft_nms(boxes, scores, iou_threshold=0.3, sigma=0.5, min_score=1e-3, method="linear"):
        return _soft_nms_graph(b, boxes, scores, iou_threshold, sigma, min_score, method)

    def bbox_overlaps(bboxes1, bboxes2, mode="iou", aligned=False, offset=0):
        return _bbox_overlaps_graph(b, bboxes1, bboxes2, mode, aligned, offset)

    def sigmoid_focal_loss(input, target, gamma=2.0, alpha=0.25, weight=None, reduction="mean"):
        return _sigmoid_focal_loss_graph(b, input, target, gamma, alpha, weight, reduction)

    def softmax_focal_loss(input, target, gamma=2.0, alpha=0.25, weight=None, reduction="mean"):
        return _softmax_focal_loss_graph(b, input, target, gamma, alpha, weight, reduction)

    def ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations, attention_weights):
        args = (value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
        return _ms_deform_attn_graph(b, *args)

    ops = torch.ops.mmops
    return {
        ops.roi_align.default: roi_align,
        ops._roi_align_forward.default: roi_align_forward,
        ops.roi_pool.default: roi_pool,
        ops._roi_pool_forward.default: roi_pool_forward,
        ops.nms.default: nms,
        ops.batched_nms.default: batched_nms,
        ops.deform_conv2d.default: deform_conv2d,
        ops.modulated_deform_conv2d.default: modulated_deform_conv2d,
        ops.multi_level_roi_align.default: multi_level_roi_align,
        ops._multi_level_roi_align_forward.default: multi_level_roi_align_forward,
        ops.soft_nms.default: soft_nms,
        ops.bbox_overlaps.default: bbox_overlaps,
        ops.sigmoid_focal_loss.default: sigmoid_focal_loss,
        ops.softmax_focal_loss.default: softmax_focal_loss,
        ops.ms_deform_attn.default: ms_deform_attn,
    }


_TABLE: Optional[Dict[Any, Callable]] = None


def translation_table() -> Dict[Any, Callable]:
    """The dynamo exporter's table for the mmops ops ({OpOverload: onnxscript
    function}), for ``torch.onnx.export(..., custom_translation_table=...)``.
    Needs onnxscript."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _dynamo_functions()
    return dict(_TABLE)


def _register_dynamo() -> None:
    """Adds the functions to onnxscript's torchlib registry, which the dynamo
    exporter reads on every export; a no-op without onnxscript."""
    try:
        from onnxscript.function_libs.torch_lib import registration
    except ImportError:
        return
    for target, fn in translation_table().items():
        registration.torch_op(f"mmops::{target._opname}", trace_only=True)(fn)


def export(model, args, f=None, *, custom_translation_table: Optional[Dict[Any, Callable]] = None, **kwargs):
    """torch.onnx.export with the mmops translations (dynamo exporter unless
    ``dynamo=False`` is given); other keywords go to torch.onnx.export.
    The custom domain ``mmops`` is declared for the TorchScript exporter."""
    if kwargs.get("dynamo", True):
        table = translation_table()
        table.update(custom_translation_table or {})
        kwargs["custom_translation_table"] = table
    else:
        opsets: Dict[str, int] = dict(kwargs.pop("custom_opsets", None) or {})
        opsets.setdefault(DOMAIN, 1)
        kwargs["custom_opsets"] = opsets
    return torch.onnx.export(model, args, f, **kwargs)


_register_torchscript()
_register_dynamo()
