"""The stand-in for mmcv-full's compiled ``mmcv._ext``.

mmcv-lite's ``mmcv/ops/*.py`` call ``ext_loader.load_ext("_ext", names)`` at
import, which only checks that each name exists. Every name exists here:
the few kernels that mmcv's Python calls directly (NMS, soft-NMS, nms_match,
box overlaps, contour_expand, pixel_group, version queries) run on mmops; every other one raises
NotImplementedError naming the mmcv op when called, never at import.
"""

import importlib
import types
from typing import Any, Callable, Dict

import torch

_SUFFIXES = ("_forward", "_backward", "_backward_input", "_backward_parameters", "_backward_param")


def op_name(ext_name: str) -> str:
    """The mmcv op an ext kernel belongs to (roi_align_forward -> roi_align)."""
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if ext_name.endswith(suffix):
            return ext_name[: -len(suffix)]
    return ext_name


def unserved(ext_name: str) -> Callable[..., Any]:
    """A kernel mmops does not provide: calling it names the mmcv op."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"mmcv.ops: op '{op_name(ext_name)}' (mmcv._ext.{ext_name}) is not implemented by mmops; "
            "the mmops bridge serves the ops listed in docs/mmcv_bridge.md"
        )

    kernel.__name__ = ext_name
    kernel.__qualname__ = ext_name
    return kernel


def mmops_attr(name: str, mmcv_op: str) -> Any:
    """mmops.<name>, resolved at call time (ops being added to mmops are
    wired by name); NotImplementedError naming the mmcv op when absent."""
    mmops = importlib.import_module("mmops")
    value = getattr(mmops, name, None)
    if value is None:
        raise NotImplementedError(f"mmcv.ops: op '{mmcv_op}' is not implemented by mmops (no mmops.{name})")
    return value


def _shift_for_offset(boxes: torch.Tensor, offset: int) -> torch.Tensor:
    from mmops.nms import _shift_for_offset as shift

    return shift(boxes, int(offset))


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float, offset: int = 0) -> torch.Tensor:
    return torch.ops.mmops.nms(_shift_for_offset(boxes, offset), scores, float(iou_threshold))


_SOFT_NMS_METHODS = {0: "naive", 1: "linear", 2: "gaussian"}


def softnms(
    boxes: torch.Tensor,
    scores: torch.Tensor,
    dets: torch.Tensor,
    iou_threshold: float,
    sigma: float,
    min_score: float,
    method: int,
    offset: int,
) -> torch.Tensor:
    """mmcv's kernel contract: fills dets[:K] (boxes, decayed score), returns the K indices."""
    from mmops.nms import soft_nms

    if int(method) not in _SOFT_NMS_METHODS:
        raise ValueError(f"mmcv.ops.soft_nms: method must be 0, 1 or 2, got {method}")
    kept, inds = soft_nms(
        boxes, scores, float(iou_threshold), float(sigma), float(min_score), _SOFT_NMS_METHODS[int(method)], int(offset)
    )
    dets[: kept.size(0)].copy_(kept)
    return inds


def nms_match(dets: torch.Tensor, iou_threshold: float) -> list:
    """mmcv's kernel returns one list of ints per group; mmops.nms_match's groups
    (tensors, arrays or lists) are turned into that."""
    groups = mmops_attr("nms_match", "nms_match")(dets, float(iou_threshold))
    return [g.tolist() if hasattr(g, "tolist") else list(g) for g in groups]


def contour_expand(
    kernel_mask: torch.Tensor, internal_kernel_label: torch.Tensor, min_kernel_area: int, kernel_num: int
) -> list:
    """mmcv's kernel returns the label map as a list of rows (mmcv's result, no
    progressive rounds)."""
    return mmops_attr("contour_expand", "contour_expand")(
        kernel_mask, internal_kernel_label, int(min_kernel_area), int(kernel_num)
    ).tolist()


def pixel_group(
    score: torch.Tensor,
    mask: torch.Tensor,
    embedding: torch.Tensor,
    kernel_label: torch.Tensor,
    kernel_contour: torch.Tensor,
    kernel_region_num: int,
    distance_threshold: float,
) -> list:
    """mmcv's kernel returns one list [mean score, count, x0, y0, ...] per label."""
    return mmops_attr("pixel_group", "pixel_group")(
        score, mask, embedding, kernel_label, kernel_contour, int(kernel_region_num), float(distance_threshold)
    )


def bbox_overlaps(
    bboxes1: torch.Tensor,
    bboxes2: torch.Tensor,
    ious: torch.Tensor,
    mode: int = 0,
    aligned: bool = False,
    offset: int = 0,
) -> None:
    """mmcv's kernel contract: fills ious (mode 0 = iou, 1 = iof)."""
    modes = {0: "iou", 1: "iof"}
    if int(mode) not in modes:
        raise ValueError(f"mmcv.ops.bbox_overlaps: mode must be 0 (iou) or 1 (iof), got {mode}")
    ious.copy_(torch.ops.mmops.bbox_overlaps(bboxes1, bboxes2, modes[int(mode)], bool(aligned), int(offset)))


def get_compiler_version() -> str:
    return "mmops (libmmops.so)"


def get_compiling_cuda_version() -> str:
    return str(torch.version.cuda) if torch.version.cuda else "not available"


SERVED: Dict[str, Callable[..., Any]] = {
    "nms": nms,
    "softnms": softnms,
    "nms_match": nms_match,
    "bbox_overlaps": bbox_overlaps,
    "contour_expand": contour_expand,
    "pixel_group": pixel_group,
    "get_compiler_version": get_compiler_version,
    "get_compiling_cuda_version": get_compiling_cuda_version,
}


def make_module(name: str = "mmcv._ext") -> types.ModuleType:
    """The module object: SERVED kernels, and a stub for any other public name."""
    module = types.ModuleType(name, __doc__)
    module.__dict__.update(SERVED)
    module.__mmops_bridge__ = True

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        stub = unserved(attr)
        setattr(module, attr, stub)
        return stub

    module.__getattr__ = __getattr__
    return module


# --- box_iou_rotated / nms_rotated ---
def _overlap_mode(op: str, mode_flag: int) -> str:
    modes = {0: "iou", 1: "iof"}
    if int(mode_flag) not in modes:
        raise ValueError(f"mmcv.ops.{op}: mode_flag must be 0 (iou) or 1 (iof), got {mode_flag}")
    return modes[int(mode_flag)]


def box_iou_rotated(
    bboxes1: torch.Tensor, bboxes2: torch.Tensor, ious: torch.Tensor, mode_flag: int = 0, aligned: bool = False
) -> None:
    """mmcv's kernel contract: fills ious (flat [N * M], or [N] when aligned);
    the angles arrive already flipped for clockwise=False."""
    mode = _overlap_mode("box_iou_rotated", mode_flag)
    out = torch.ops.mmops.box_iou_rotated(bboxes1, bboxes2, mode, bool(aligned), True)
    ious.copy_(out.reshape(ious.shape))


def box_iou_quadri(
    bboxes1: torch.Tensor, bboxes2: torch.Tensor, ious: torch.Tensor, mode_flag: int = 0, aligned: bool = False
) -> None:
    mode = _overlap_mode("box_iou_quadri", mode_flag)
    ious.copy_(torch.ops.mmops.box_iou_quadri(bboxes1, bboxes2, mode, bool(aligned)).reshape(ious.shape))


def nms_rotated(
    dets: torch.Tensor,
    scores: torch.Tensor,
    order: torch.Tensor,
    dets_sorted: torch.Tensor,
    labels: torch.Tensor,
    iou_threshold: float,
    multi_label: bool,
) -> torch.Tensor:
    """mmcv's kernel contract: dets [N, 5] (or [N, 6] with the label column
    when multi_label), angles already flipped; order/dets_sorted are ignored
    (mmops sorts on the device, ties to the lower index)."""
    boxes = dets[:, :5].contiguous()
    return torch.ops.mmops.nms_rotated(boxes, scores, float(iou_threshold), labels if multi_label else None, True)


def nms_quadri(
    dets: torch.Tensor,
    scores: torch.Tensor,
    order: torch.Tensor,
    dets_sorted: torch.Tensor,
    iou_threshold: float,
    multi_label: bool,
) -> torch.Tensor:
    """mmcv's kernel contract: dets [N, 8], or [N, 9] with the label in the last column."""
    labels = dets[:, 8].contiguous() if multi_label else None
    return torch.ops.mmops.nms_quadri(dets[:, :8].contiguous(), scores, float(iou_threshold), labels)


# --- roi_align_rotated / riroi_align_rotated ---
def roi_align_rotated_forward(
    input, rois, output, pooled_height, pooled_width, spatial_scale, sampling_ratio=0, aligned=True, clockwise=False
) -> None:
    """mmcv's kernel contract: fills output [K, C, pooled_height, pooled_width]."""
    output.copy_(
        torch.ops.mmops.roi_align_rotated(
            input,
            rois,
            [int(pooled_height), int(pooled_width)],
            float(spatial_scale),
            max(int(sampling_ratio), 0),
            bool(aligned),
            bool(clockwise),
        )
    )


def roi_align_rotated_backward(
    grad_output,
    rois,
    grad_input,
    pooled_height,
    pooled_width,
    spatial_scale,
    sampling_ratio=0,
    aligned=True,
    clockwise=False,
) -> None:
    """mmcv's kernel contract: fills grad_input [N, C, H, W]."""
    grad_input.copy_(
        torch.ops.mmops._roi_align_rotated_backward(
            grad_output,
            rois,
            list(grad_input.shape),
            float(spatial_scale),
            max(int(sampling_ratio), 0),
            bool(aligned),
            bool(clockwise),
        )
    )


def riroi_align_rotated_forward(
    features,
    rois,
    output,
    pooled_height,
    pooled_width,
    spatial_scale,
    num_samples=0,
    num_orientations=8,
    clockwise=False,
) -> None:
    """mmcv's kernel contract: fills output [K, C, pooled_height, pooled_width]."""
    output.copy_(
        torch.ops.mmops.riroi_align_rotated(
            features,
            rois,
            [int(pooled_height), int(pooled_width)],
            float(spatial_scale),
            max(int(num_samples), 0),
            int(num_orientations),
            bool(clockwise),
        )
    )


def riroi_align_rotated_backward(
    grad_output,
    rois,
    grad_input,
    pooled_height,
    pooled_width,
    spatial_scale,
    num_samples=0,
    num_orientations=8,
    clockwise=False,
) -> None:
    """mmcv's kernel contract: fills grad_input [N, C, H, W]."""
    grad_input.copy_(
        torch.ops.mmops._riroi_align_rotated_backward(
            grad_output,
            rois,
            list(grad_input.shape),
            float(spatial_scale),
            max(int(num_samples), 0),
            int(num_orientations),
            bool(clockwise),
        )
    )


# --- rotated_feature_align, active_rotated_filter ---
def rotated_feature_align_forward(
    features: torch.Tensor, best_rbboxes: torch.Tensor, output: torch.Tensor, spatial_scale: float, points: int
) -> None:
    """mmcv's kernel contract: fills output."""
    output.copy_(torch.ops.mmops.rotated_feature_align(features, best_rbboxes, float(spatial_scale), int(points)))


def rotated_feature_align_backward(
    top_grad: torch.Tensor, best_rbboxes: torch.Tensor, bottom_grad: torch.Tensor, spatial_scale: float, points: int
) -> None:
    """mmcv's kernel contract: fills bottom_grad."""
    grad = torch.ops.mmops._rotated_feature_align_backward(top_grad, best_rbboxes, float(spatial_scale), int(points))
    bottom_grad.copy_(grad)


def active_rotated_filter_forward(input: torch.Tensor, indices: torch.Tensor, output: torch.Tensor) -> None:
    """mmcv's kernel contract: fills output."""
    output.copy_(torch.ops.mmops.active_rotated_filter(input, indices))


def active_rotated_filter_backward(grad_out: torch.Tensor, indices: torch.Tensor, grad_in: torch.Tensor) -> None:
    """mmcv's kernel contract: fills grad_in (the shape of input)."""
    grad_in.copy_(torch.ops.mmops._active_rotated_filter_backward(grad_out, indices, list(grad_in.shape)))


# --- poly (min_area_polygons, convex_iou, convex_giou, points_in_polygons) ---


def min_area_polygons(pointsets: torch.Tensor, polygons: torch.Tensor) -> None:
    """mmcv's kernel contract: fills polygons [N, 8]."""
    polygons.copy_(torch.ops.mmops.min_area_polygons(pointsets))


def convex_iou(pointsets: torch.Tensor, polygons: torch.Tensor, ious: torch.Tensor) -> None:
    """mmcv's kernel contract: fills ious [N, K]."""
    ious.copy_(torch.ops.mmops.convex_iou(pointsets, polygons))


def convex_giou(pointsets: torch.Tensor, polygons: torch.Tensor, output: torch.Tensor) -> None:
    """mmcv's kernel contract: fills output [N, 19] with the gradient (18) then giou."""
    giou, grad = torch.ops.mmops.convex_giou(pointsets, polygons)
    output[:, :18].copy_(grad)
    output[:, 18].copy_(giou)


def points_in_polygons_forward(points: torch.Tensor, polygons: torch.Tensor, output: torch.Tensor) -> None:
    """mmcv's kernel contract: fills output [N, M] (float32 in mmcv's Python)."""
    output.copy_(torch.ops.mmops.points_in_polygons(points, polygons))


SERVED.update(
    {
        "box_iou_rotated": box_iou_rotated,
        "box_iou_quadri": box_iou_quadri,
        "nms_rotated": nms_rotated,
        "nms_quadri": nms_quadri,
        "roi_align_rotated_forward": roi_align_rotated_forward,
        "roi_align_rotated_backward": roi_align_rotated_backward,
        "riroi_align_rotated_forward": riroi_align_rotated_forward,
        "riroi_align_rotated_backward": riroi_align_rotated_backward,
        "rotated_feature_align_forward": rotated_feature_align_forward,
        "rotated_feature_align_backward": rotated_feature_align_backward,
        "active_rotated_filter_forward": active_rotated_filter_forward,
        "active_rotated_filter_backward": active_rotated_filter_backward,
        "min_area_polygons": min_area_polygons,
        "convex_iou": convex_iou,
        "convex_giou": convex_giou,
        "points_in_polygons_forward": points_in_polygons_forward,
    }
)


# --- assign_score_withk, chamfer_distance ---
def assign_score_withk_forward(*args: Any) -> None:
    """mmcv's kernel contract, (B, N, npoint, M, K, out_dim, aggregate, points, centers, scores,
    knn_idx, output): fills output [B, out_dim, npoint, K] (aggregate 0 / 1 / 2: no effect)."""
    aggregate, points, centers, scores, knn_idx, output = args[6:]
    output.copy_(torch.ops.mmops.assign_score_withk(scores, points, centers, knn_idx, ("sum", "avg", "max")[aggregate]))


def assign_score_withk_backward(*args: Any) -> None:
    """mmcv's kernel contract, (B, N, npoint, M, K, out_dim, aggregate, grad_out, points, centers,
    scores, knn_idx, grad_points, grad_centers, grad_scores): fills the three gradients."""
    grad_out, points, centers, scores, knn_idx, grad_points, grad_centers, grad_scores = args[7:]
    gs, gp, gc = torch.ops.mmops._assign_score_withk_backward(grad_out, scores, points, centers, knn_idx)
    grad_scores.copy_(gs)
    grad_points.copy_(gp)
    grad_centers.copy_(gc)


def chamfer_distance_forward(
    xyz1: torch.Tensor,
    xyz2: torch.Tensor,
    dist1: torch.Tensor,
    dist2: torch.Tensor,
    idx1: torch.Tensor,
    idx2: torch.Tensor,
) -> None:
    """mmcv's kernel contract: fills dist1, dist2, idx1 and idx2."""
    for out, value in zip((dist1, dist2, idx1, idx2), torch.ops.mmops.chamfer_distance(xyz1, xyz2)):
        out.copy_(value)


def chamfer_distance_backward(
    xyz1: torch.Tensor,
    xyz2: torch.Tensor,
    idx1: torch.Tensor,
    idx2: torch.Tensor,
    grad_dist1: torch.Tensor,
    grad_dist2: torch.Tensor,
    grad_xyz1: torch.Tensor,
    grad_xyz2: torch.Tensor,
) -> None:
    """mmcv's kernel contract: fills grad_xyz1 and grad_xyz2."""
    g1, g2 = torch.ops.mmops._chamfer_distance_backward(xyz1, xyz2, idx1, idx2, grad_dist1, grad_dist2)
    grad_xyz1.copy_(g1)
    grad_xyz2.copy_(g2)


SERVED.update(
    {
        "assign_score_withk_forward": assign_score_withk_forward,
        "assign_score_withk_backward": assign_score_withk_backward,
        "chamfer_distance_forward": chamfer_distance_forward,
        "chamfer_distance_backward": chamfer_distance_backward,
    }
)


# --- iou3d ---
def iou3d_boxes_overlap_bev_forward(boxes_a: torch.Tensor, boxes_b: torch.Tensor, ans_overlap: torch.Tensor) -> None:
    """mmcv's kernel contract: fills ans_overlap [N, M] (boxes [*, 7])."""
    ans_overlap.copy_(torch.ops.mmops.boxes_overlap_bev(boxes_a, boxes_b))


SERVED["iou3d_boxes_overlap_bev_forward"] = iou3d_boxes_overlap_bev_forward


# --- psa_mask ---
def psa_type_name(psa_type: Any) -> str:
    """mmcv's psa_type: 0 / "collect" or 1 / "distribute"."""
    if isinstance(psa_type, str):
        return psa_type
    names = {0: "collect", 1: "distribute"}
    if int(psa_type) not in names:
        raise ValueError(f"mmcv.ops.psa_mask: psa_type must be 0 (collect) or 1 (distribute), got {psa_type}")
    return names[int(psa_type)]


def psamask_forward(
    input: torch.Tensor,
    output: torch.Tensor,
    psa_type: Any,
    num_: int,
    h_feature: int,
    w_feature: int,
    h_mask: int,
    w_mask: int,
    half_h_mask: int,
    half_w_mask: int,
) -> None:
    """mmcv's kernel contract: fills output [N, H * W, H, W] (mmcv's Python passes half = (mask - 1) // 2)."""
    output.copy_(torch.ops.mmops.psa_mask(input, psa_type_name(psa_type), [int(h_mask), int(w_mask)]))


def psamask_backward(
    grad_output: torch.Tensor,
    grad_input: torch.Tensor,
    psa_type: Any,
    num_: int,
    h_feature: int,
    w_feature: int,
    h_mask: int,
    w_mask: int,
    half_h_mask: int,
    half_w_mask: int,
) -> None:
    """mmcv's kernel contract: fills grad_input [N, h_mask * w_mask, H, W]."""
    grad = torch.ops.mmops._psa_mask_backward(grad_output, psa_type_name(psa_type), [int(h_mask), int(w_mask)])
    grad_input.copy_(grad)


SERVED.update({"psamask_forward": psamask_forward, "psamask_backward": psamask_backward})


# --- border_align ---
def border_align_forward(
    input: torch.Tensor, boxes: torch.Tensor, output: torch.Tensor, argmax_idx: torch.Tensor, pool_size: int
) -> None:
    """mmcv's kernel contract: fills output [N, C, H * W, 4] and argmax_idx (int32, the winning point)."""
    out, argmax = torch.ops.mmops._border_align_forward(input, boxes, int(pool_size))
    output.copy_(out)
    argmax_idx.copy_(argmax)


def border_align_backward(
    grad_output: torch.Tensor, boxes: torch.Tensor, argmax_idx: torch.Tensor, grad_input: torch.Tensor, pool_size: int
) -> None:
    """mmcv's kernel contract: fills grad_input [N, 4C, H, W]."""
    grad = torch.ops.mmops._border_align_backward(
        grad_output, boxes, argmax_idx.to(torch.int32), int(pool_size), list(grad_input.shape)
    )
    grad_input.copy_(grad)


SERVED.update({"border_align_forward": border_align_forward, "border_align_backward": border_align_backward})


# --- bezier_align ---
def bezier_align_forward(
    input: torch.Tensor,
    rois: torch.Tensor,
    output: torch.Tensor,
    aligned_height: int,
    aligned_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    aligned: bool,
) -> None:
    """mmcv's kernel contract: fills output [K, C, aligned_height, aligned_width]."""
    out = torch.ops.mmops.bezier_align(
        input, rois, [int(aligned_height), int(aligned_width)], float(spatial_scale), int(sampling_ratio), bool(aligned)
    )
    output.copy_(out)


def bezier_align_backward(
    grad_output: torch.Tensor,
    rois: torch.Tensor,
    grad_input: torch.Tensor,
    aligned_height: int,
    aligned_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    aligned: bool,
) -> None:
    """mmcv's kernel contract: adds the gradient into grad_input [N, C, H, W] (mmcv's
    kernel accumulates; aligned_height / aligned_width are grad_output's out_h / out_w)."""
    grad = torch.ops.mmops._bezier_align_backward(
        grad_output, rois, list(grad_input.shape), float(spatial_scale), int(sampling_ratio), bool(aligned)
    )
    grad_input.add_(grad)


SERVED.update({"bezier_align_forward": bezier_align_forward, "bezier_align_backward": bezier_align_backward})


# --- upfirdn2d ---
def upfirdn2d(
    x: torch.Tensor,
    f: torch.Tensor,
    upx: int,
    upy: int,
    downx: int,
    downy: int,
    padx0: int,
    padx1: int,
    pady0: int,
    pady1: int,
    flip: bool,
    gain: float,
) -> torch.Tensor:
    """mmcv's kernel contract: returns the output of f [fh, fw]; flip False convolves (as
    mmops), flip True correlates (mmops gets the flipped filter); gain scales the result."""
    kernel = (f.flip([0, 1]) if flip else f) * float(gain)
    up, down = [int(upx), int(upy)], [int(downx), int(downy)]
    return torch.ops.mmops.upfirdn2d(x, kernel, up, down, [int(padx0), int(padx1), int(pady0), int(pady1)])


SERVED.update({"upfirdn2d": upfirdn2d})


# --- fused_bias_leakyrelu ---
def fused_bias_leakyrelu(
    input: torch.Tensor,
    bias: torch.Tensor,
    ref: torch.Tensor,
    act: int = 3,
    grad: int = 0,
    alpha: float = 0.2,
    scale: float = 2**0.5,
) -> torch.Tensor:
    """mmcv's kernel contract (act 3, leaky ReLU): grad 0 returns the activation of input + bias;
    grad 1 returns (input + bias) * (ref > 0 ? scale : alpha * scale), ref the forward's output
    (bias empty: none)."""
    if int(act) != 3 or int(grad) not in (0, 1):
        raise NotImplementedError(f"mmcv.ops: fused_bias_leakyrelu with act={act}, grad={grad} is not served by mmops")
    if int(grad) == 0:
        b = bias if bias.numel() > 0 else input.new_zeros(input.shape[1])
        return torch.ops.mmops.fused_bias_leakyrelu(input, b, float(alpha), float(scale))
    if bias.numel() > 0:
        input = input + bias.reshape([-1 if d == 1 else 1 for d in range(input.dim())])
    return torch.ops.mmops._fused_bias_leakyrelu_backward(input, ref, float(alpha), float(scale))


SERVED.update({"fused_bias_leakyrelu": fused_bias_leakyrelu})
