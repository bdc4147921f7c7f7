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
from typing import Any, Callable, Dict, Optional, Sequence

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
# composites of standard ops, written once for both exporters against a builder
# b(op_name, *inputs, **attributes), b.ints(values), b.float_like(value, tensor)
# --------------------------------------------------------------------------


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


def _ms_deform_attn_graph(b, value, spatial_shapes, level_start_index, loc, attn, num_levels, gs_mode):
    """mmcv's multi_scale_deformable_attn_pytorch: GridSample per level (zeros outside,
    align_corners 0), times the weights, summed over levels and points."""

    def reshape(x, *dims):  # allowzero: an empty batch or query count is a size, not "copy"
        return b("Reshape", x, b("Concat", *dims, axis=0), allowzero=1)

    def dim(shape, i):
        return b("Slice", shape, b.ints([i]), b.ints([i + 1]))

    vshape, lshape = b("Shape", value), b("Shape", loc)  # [B, S, M, D], [B, Q, M, L, P, 2]
    batch, heads, channels = dim(vshape, 0), dim(vshape, 2), dim(vshape, 3)
    queries, points = dim(lshape, 1), dim(lshape, 4)
    bm = b("Mul", batch, heads)
    shapes = b("Cast", spatial_shapes, to=7)
    starts = b("Cast", level_start_index, to=7)
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
    positive = b("Equal", b("Unsqueeze", b("Cast", target, to=7), b.ints([1])), b("Unsqueeze", classes, b.ints([0])))
    pos = b(
        "Mul",
        b("Mul", b.float_like(float(alpha), input), b("Pow", b("Sub", one, p), g)),
        b("Softplus", b("Neg", input)),
    )
    neg = b("Mul", b("Mul", b.float_like(1.0 - float(alpha), input), b("Pow", p, g)), b("Softplus", input))
    loss = b("Where", positive, pos, neg)
    if weight is not None:
        loss = b("Mul", loss, _row_weight(b, weight, b("Cast", target, to=7), input))
    return _reduce_loss(b, loss, reduction)


def _softmax_focal_loss_graph(b, input, target, gamma, alpha, weight, reduction):
    """-alpha (1 - p)^gamma log p per row, p the softmax at the target, log p from LogSoftmax."""
    t = b("Unsqueeze", b("Cast", target, to=7), b.ints([1]))
    logp = b("GatherElements", b("LogSoftmax", input, axis=1), t, axis=1)  # [N, 1]
    one, g = b.float_like(1.0, input), b.float_like(float(gamma), input)
    loss = b("Mul", b("Mul", b.float_like(-float(alpha), input), b("Pow", b("Sub", one, b("Exp", logp)), g)), logp)
    if weight is not None:
        loss = b("Mul", loss, b("Unsqueeze", b("Gather", weight, b("Cast", target, to=7), axis=0), b.ints([1])))
    return _reduce_loss(b, b("Reshape", loss, b.ints([-1])), reduction)


def _attr_suffix(value) -> str:
    first = value[0] if isinstance(value, (list, tuple)) else value
    return "s" if isinstance(first, str) else "f" if isinstance(first, float) else "i"


class _TSBuilder:
    def __init__(self, g):
        self.g = g

    def __call__(self, name, *inputs, **attrs):
        return self.g.op(name, *inputs, **{f"{k}_{_attr_suffix(v)}": v for k, v in attrs.items()})

    def ints(self, values):
        return self.g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))

    def float_like(self, value, like):
        return self.g.op("CastLike", self.g.op("Constant", value_t=torch.tensor(value, dtype=torch.float32)), like)


class _OnnxscriptBuilder:
    def __init__(self, opset):
        self.op = opset

    def __call__(self, name, *inputs, **attrs):
        return getattr(self.op, name)(*inputs, **attrs)

    def ints(self, values):
        if isinstance(values, list):
            return self.op.Constant(value_ints=values)
        return self.op.Constant(value_int=values)

    def float_like(self, value, like):
        return self.op.CastLike(self.op.Constant(value_float=value), like)


# --------------------------------------------------------------------------
# TorchScript exporter (dynamo=False): symbolic functions
# --------------------------------------------------------------------------


def _ts_const(g, value, dtype):
    return g.op("Constant", value_t=torch.tensor(value, dtype=dtype))


def _ts_roi_align(g, input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned):
    # Aligned with an adaptive grid, a reversed box (x2 < x1) pools zeros in mmcv (an
    # empty grid) but overflows onnxruntime's grid size: x2, y2 are clamped to x1, y1,
    # which gives the same zeros. Other boxes are unchanged.
    _check_pool_mode(pool_mode)
    ph, pw = output_size
    if pool_mode == "max" and sampling_ratio <= 0:
        return g.op(
            f"{DOMAIN}::RoIAlignMax",
            input,
            rois,
            output_height_i=ph,
            output_width_i=pw,
            spatial_scale_f=spatial_scale,
            sampling_ratio_i=sampling_ratio,
            aligned_i=int(aligned),
        ).setType(input.type().with_sizes([None, None, ph, pw]))
    cols = g.op("Split", rois, _ts_const(g, [1, 2, 2], torch.int64), axis_i=1, outputs=3)
    batch = g.op("Cast", g.op("Squeeze", cols[0], _ts_const(g, [1], torch.int64)), to_i=7)
    hi = cols[2] if not (aligned and sampling_ratio <= 0) else g.op("Max", cols[1], cols[2])
    boxes = g.op("Concat", cols[1], hi, axis_i=1)
    mode = "half_pixel" if aligned else "output_half_pixel"
    s = sampling_ratio if pool_mode == "max" else 1
    out = g.op(
        "RoiAlign",
        input,
        boxes,
        batch,
        coordinate_transformation_mode_s=mode,
        mode_s="avg",
        output_height_i=ph * s,
        output_width_i=pw * s,
        sampling_ratio_i=sampling_ratio if pool_mode == "avg" else 1,
        spatial_scale_f=spatial_scale,
    )
    if pool_mode == "max":
        out = g.op("MaxPool", out, kernel_shape_i=[s, s], strides_i=[s, s])
    return out


def _ts_roi_pool(g, input, rois, output_size, spatial_scale):
    return g.op("MaxRoiPool", input, rois, pooled_shape_i=list(output_size), spatial_scale_f=spatial_scale)


def _ts_nms_boxes_scores(g, boxes, scores):
    b = g.op("Unsqueeze", g.op("Cast", boxes, to_i=1), _ts_const(g, [0], torch.int64))
    return b, g.op("Cast", scores, to_i=1)


def _ts_selected_boxes(g, selected):
    col = g.op("Gather", selected, _ts_const(g, 2, torch.int64), axis_i=1)
    return col


def _ts_nms(g, boxes, scores, iou_threshold):
    _check_nms_threshold(iou_threshold)
    b, s = _ts_nms_boxes_scores(g, boxes, scores)
    s = g.op("Unsqueeze", s, _ts_const(g, [0, 1], torch.int64))
    sel = g.op(
        "NonMaxSuppression",
        b,
        s,
        _ts_const(g, [_INT64_MAX], torch.int64),
        _ts_const(g, [iou_threshold], torch.float32),
        center_point_box_i=0,
    )
    return _ts_selected_boxes(g, sel)


def _ts_batched_nms(g, boxes, scores, idxs, iou_threshold):
    _check_nms_threshold(iou_threshold)
    b, s = _ts_nms_boxes_scores(g, boxes, scores)
    _, _, inverse, _ = g.op("Unique", g.op("Reshape", idxs, _ts_const(g, [-1], torch.int64)), sorted_i=1, outputs=4)
    one = _ts_const(g, 1, torch.int64)
    ncls = g.op("Add", g.op("ReduceMax", inverse, keepdims_i=0), one)
    classes = g.op("Range", _ts_const(g, 0, torch.int64), ncls, one)
    member = g.op(
        "Equal",
        g.op("Unsqueeze", classes, _ts_const(g, [1], torch.int64)),
        g.op("Unsqueeze", inverse, _ts_const(g, [0], torch.int64)),
    )
    per_class = g.op("Where", member, s, _ts_const(g, -math.inf, torch.float32))
    sel = g.op(
        "NonMaxSuppression",
        b,
        g.op("Unsqueeze", per_class, _ts_const(g, [0], torch.int64)),
        _ts_const(g, [_INT64_MAX], torch.int64),
        _ts_const(g, [iou_threshold], torch.float32),
        _ts_const(g, [_FLOAT_LOWEST], torch.float32),
        center_point_box_i=0,
    )
    kept = _ts_selected_boxes(g, sel)
    k = g.op("Shape", kept)
    # ascending box index, then a stable sort by decreasing score: ties keep the lower index first
    kept = g.op("TopK", kept, k, largest_i=0, sorted_i=1, outputs=2)[0]
    order = g.op("TopK", g.op("Gather", s, kept, axis_i=0), k, largest_i=1, sorted_i=1, outputs=2)[1]
    return g.op("Gather", kept, order, axis_i=0)


def _ts_deform(g, input, offset, mask, weight, bias, stride, padding, dilation, groups, deform_groups):
    inputs = [input, weight, offset]
    if not sh._is_none(bias) or mask is not None:
        inputs.append(sh._optional_input_placeholder_tensor(g) if sh._is_none(bias) else bias)
    if mask is not None:
        inputs.append(mask)
    return g.op(
        "DeformConv",
        *inputs,
        dilations_i=list(dilation),
        group_i=groups,
        offset_group_i=deform_groups,
        pads_i=list(padding) * 2,
        strides_i=list(stride),
    )


@sh.parse_args("v", "v", "v", "v", "is", "is", "is", "i", "i")
def _ts_deform_conv2d(g, input, offset, weight, bias, stride, padding, dilation, groups, deform_groups):
    return _ts_deform(g, input, offset, None, weight, bias, stride, padding, dilation, groups, deform_groups)


@sh.parse_args("v", "v", "v", "v", "v", "is", "is", "is", "i", "i")
def _ts_modulated_deform_conv2d(g, input, offset, mask, weight, bias, stride, padding, dilation, groups, deform_groups):
    return _ts_deform(g, input, offset, mask, weight, bias, stride, padding, dilation, groups, deform_groups)


_TS_ATTR_SUFFIX = {"f": "f", "i": "i", "b": "i", "s": "s"}


def _ts_custom(name: str, arg_kinds: str, attr_names: Sequence[str], outputs: int = 1) -> Callable:
    """A symbolic emitting mmops::<name>: tensor arguments ("v") become inputs
    (None ones are dropped), the others attributes named as in the schema."""

    @sh.parse_args(*arg_kinds)
    def symbolic(g, *args):
        tensors = [a for a, k in zip(args, arg_kinds) if k == "v" and not sh._is_none(a)]
        scalars = [(a, k) for a, k in zip(args, arg_kinds) if k != "v"]
        attrs = {f"{n}_{_TS_ATTR_SUFFIX[k]}": int(a) if k == "b" else a for n, (a, k) in zip(attr_names, scalars)}
        return g.op(f"{DOMAIN}::{name}", *tensors, outputs=outputs, **attrs)

    return symbolic


def _ts_multi_level_roi_align(g, features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned, fs):
    maps = sh._unpack_list(features)
    output_size = sh._get_const(output_size, "is", "output_size")
    scales = sh._get_const(spatial_scales, "fs", "spatial_scales")
    sampling_ratio = sh._get_const(sampling_ratio, "i", "sampling_ratio")
    pool_mode = sh._get_const(pool_mode, "s", "pool_mode")
    aligned = bool(sh._get_const(aligned, "b", "aligned"))
    fs = sh._get_const(fs, "i", "finest_scale")
    if pool_mode == "max" and sampling_ratio <= 0:
        attrs = dict(spatial_scales_f=scales, sampling_ratio_i=sampling_ratio, pool_mode_s=pool_mode)
        return g.op(
            f"{DOMAIN}::MultiLevelRoIAlign",
            rois,
            *maps,
            output_height_i=output_size[0],
            output_width_i=output_size[1],
            aligned_i=int(aligned),
            finest_scale_i=fs,
            **attrs,
        )
    per_level = [
        _ts_roi_align(g, m, rois, output_size, scale, sampling_ratio, pool_mode, aligned)
        for m, scale in zip(maps, scales)
    ]
    return _fpn_select(_TSBuilder(g), rois, per_level, fs)


@sh.parse_args("v", "v", "s", "b", "i")
def _ts_bbox_overlaps(g, bboxes1, bboxes2, mode, aligned, offset):
    return _bbox_overlaps_graph(_TSBuilder(g), bboxes1, bboxes2, mode, aligned, offset)


def _ts_ms_deform_attn(g, value, spatial_shapes, level_start_index, loc, attn):
    sizes = sh._get_tensor_sizes(loc)
    if sizes is None or len(sizes) != 6 or sizes[3] is None:
        raise ValueError("mmops.onnx: ms_deform_attn needs sampling_locations of static rank 6 and level count")
    mode = "linear" if g.opset >= 20 else "bilinear"
    return _ms_deform_attn_graph(_TSBuilder(g), value, spatial_shapes, level_start_index, loc, attn, sizes[3], mode)


def _ts_focal(graph):
    @sh.parse_args("v", "v", "f", "f", "v", "s")
    def symbolic(g, input, target, gamma, alpha, weight, reduction):
        weight = None if sh._is_none(weight) else weight
        return graph(_TSBuilder(g), input, target, gamma, alpha, weight, reduction)

    return symbolic


_TS_SYMBOLICS = {
    "roi_align": (sh.parse_args("v", "v", "is", "f", "i", "s", "b")(_ts_roi_align), 16),
    "roi_pool": (sh.parse_args("v", "v", "is", "f")(_ts_roi_pool), 16),
    "nms": (sh.parse_args("v", "v", "f")(_ts_nms), 16),
    "batched_nms": (sh.parse_args("v", "v", "v", "f")(_ts_batched_nms), 16),
    "deform_conv2d": (_ts_deform_conv2d, 19),
    "modulated_deform_conv2d": (_ts_modulated_deform_conv2d, 19),
    "multi_level_roi_align": (_ts_multi_level_roi_align, 16),
    "soft_nms": (
        _ts_custom("SoftNMS", "vvfffs", ["iou_threshold", "sigma", "min_score", "method"], outputs=2),
        16,
    ),
    "bbox_overlaps": (_ts_bbox_overlaps, 16),
    "sigmoid_focal_loss": (_ts_focal(_sigmoid_focal_loss_graph), 16),
    "softmax_focal_loss": (_ts_focal(_softmax_focal_loss_graph), 16),
    "ms_deform_attn": (_ts_ms_deform_attn, 16),
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
    """{OpOverload: onnxscript function} for the ops as they appear in an exported
    graph: the public ops and the _*_forward helpers the autograd-free export
    decomposes them into (their second output, argmax, is unused there)."""
    import onnxscript
    from onnxscript import opset18 as op
    from onnxscript import opset19

    _register_custom_schemas()
    mm = onnxscript.values.Opset(DOMAIN, 1)
    FLOAT, INT64 = 1, 7  # onnx.TensorProto data types

    def roi_align(input, rois, output_size, spatial_scale=1.0, sampling_ratio=0, pool_mode="avg", aligned=True):
        _check_pool_mode(pool_mode)
        ph, pw = output_size
        if pool_mode == "max" and sampling_ratio <= 0:
            attrs = dict(spatial_scale=float(spatial_scale), sampling_ratio=int(sampling_ratio), aligned=int(aligned))
            return mm.RoIAlignMax(input, rois, output_height=ph, output_width=pw, **attrs)
        batch = op.Cast(op.Squeeze(op.Slice(rois, [0], [1], [1]), [1]), to=INT64)
        lo, hi = op.Slice(rois, [1], [3], [1]), op.Slice(rois, [3], [5], [1])
        if aligned and sampling_ratio <= 0:
            hi = op.Max(lo, hi)  # see _ts_roi_align
        boxes = op.Concat(lo, hi, axis=1)
        # max: one centre sample per sub-bin of a grid sampling_ratio times finer, then
        # MaxPool: the max of the bilinear samples, as mmcv (ONNX's own max mode differs).
        s = int(sampling_ratio) if pool_mode == "max" else 1
        out = op.RoiAlign(
            input,
            boxes,
            batch,
            coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
            mode="avg",
            output_height=ph * s,
            output_width=pw * s,
            sampling_ratio=int(sampling_ratio) if pool_mode == "avg" else 1,
            spatial_scale=float(spatial_scale),
        )
        if pool_mode == "max":
            out, _ = op.MaxPool(out, kernel_shape=[s, s], strides=[s, s])
        return out

    def roi_align_forward(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned):
        out = roi_align(input, rois, output_size, spatial_scale, sampling_ratio, pool_mode, aligned)
        return out, op.Shape(out)

    def roi_pool(input, rois, output_size, spatial_scale=1.0):
        return op.MaxRoiPool(input, rois, pooled_shape=list(output_size), spatial_scale=float(spatial_scale))

    def roi_pool_forward(input, rois, output_size, spatial_scale):
        out = roi_pool(input, rois, output_size, spatial_scale)
        return out, op.Shape(out)

    def nms_inputs(boxes, scores):
        return op.Unsqueeze(op.Cast(boxes, to=FLOAT), [0]), op.Cast(scores, to=FLOAT)

    def selected_boxes(selected):
        return op.Gather(selected, op.Constant(value_int=2), axis=1)

    def nms(boxes, scores, iou_threshold):
        _check_nms_threshold(iou_threshold)
        b, s = nms_inputs(boxes, scores)
        sel = op.NonMaxSuppression(b, op.Unsqueeze(s, [0, 1]), [_INT64_MAX], [float(iou_threshold)], center_point_box=0)
        return selected_boxes(sel)

    def batched_nms(boxes, scores, idxs, iou_threshold):
        _check_nms_threshold(iou_threshold)
        b, s = nms_inputs(boxes, scores)
        _, _, inverse, _ = op.Unique(op.Reshape(idxs, [-1]), sorted=1)
        ncls = op.Add(op.ReduceMax(inverse, keepdims=0), op.Constant(value_int=1))
        classes = op.Range(op.Constant(value_int=0), ncls, op.Constant(value_int=1))
        member = op.Equal(op.Unsqueeze(classes, [1]), op.Unsqueeze(inverse, [0]))
        per_class = op.Where(member, s, op.Constant(value_float=-math.inf))
        sel = op.NonMaxSuppression(
            b, op.Unsqueeze(per_class, [0]), [_INT64_MAX], [float(iou_threshold)], [_FLOAT_LOWEST], center_point_box=0
        )
        kept = selected_boxes(sel)
        k = op.Shape(kept)
        kept, _ = op.TopK(kept, k, largest=0, sorted=1)
        _, order = op.TopK(op.Gather(s, kept), k, largest=1, sorted=1)
        return op.Gather(kept, order)

    def deform(input, offset, mask, weight, bias, stride, padding, dilation, groups, deform_groups):
        return opset19.DeformConv(
            input,
            weight,
            offset,
            bias,
            mask,
            dilations=list(dilation),
            group=int(groups),
            offset_group=int(deform_groups),
            pads=list(padding) * 2,
            strides=list(stride),
        )

    def deform_conv2d(
        input, offset, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, deform_groups=1
    ):
        return deform(input, offset, None, weight, bias, stride, padding, dilation, groups, deform_groups)

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
        return deform(input, offset, mask, weight, bias, stride, padding, dilation, groups, deform_groups)

    def multi_level_roi_align(
        features, rois, output_size, spatial_scales, sampling_ratio=0, pool_mode="avg", aligned=True, finest_scale=56
    ):
        if pool_mode == "max" and sampling_ratio <= 0:
            return mm.MultiLevelRoIAlign(
                rois,
                *features,
                output_height=output_size[0],
                output_width=output_size[1],
                spatial_scales=[float(x) for x in spatial_scales],
                sampling_ratio=int(sampling_ratio),
                pool_mode=pool_mode,
                aligned=int(aligned),
                finest_scale=int(finest_scale),
            )
        per_level = [
            roi_align(m, rois, output_size, scale, sampling_ratio, pool_mode, aligned)
            for m, scale in zip(features, spatial_scales)
        ]
        return _fpn_select(_OnnxscriptBuilder(op), rois, per_level, finest_scale)

    def multi_level_roi_align_forward(
        features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale
    ):
        out = multi_level_roi_align(
            features, rois, output_size, spatial_scales, sampling_ratio, pool_mode, aligned, finest_scale
        )
        return out, op.Shape(out)

    def soft_nms(boxes, scores, iou_threshold=0.3, sigma=0.5, min_score=1e-3, method="linear"):
        attrs = dict(iou_threshold=float(iou_threshold), sigma=float(sigma), min_score=float(min_score))
        return mm.SoftNMS(boxes, scores, method=method, _outputs=2, **attrs)

    def bbox_overlaps(bboxes1, bboxes2, mode="iou", aligned=False, offset=0):
        return _bbox_overlaps_graph(_OnnxscriptBuilder(op), bboxes1, bboxes2, mode, aligned, offset)

    def focal(graph):
        def loss(input, target, gamma=2.0, alpha=0.25, weight=None, reduction="mean"):
            return graph(_OnnxscriptBuilder(op), input, target, gamma, alpha, weight, reduction)

        return loss

    def ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations, attention_weights):
        levels = sampling_locations.shape[3]
        args = (value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
        return _ms_deform_attn_graph(_OnnxscriptBuilder(op), *args, int(levels), "bilinear")

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
        ops.sigmoid_focal_loss.default: focal(_sigmoid_focal_loss_graph),
        ops.softmax_focal_loss.default: focal(_softmax_focal_loss_graph),
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
