"""mmops-backed replacements for mmcv's autograd Functions, with mmcv's calling
conventions (argument order, defaults, dtype casts). Each one stands in for
``<mmcv Function>.apply``: forward and backward are mmops's C++ kernels and
autograd. Ops still being added to mmops are resolved by name at call time.
"""

import warnings
from typing import Any, Optional

import torch
from torch import Tensor

from .. import deform_conv as _deform
from .. import focal_loss as _focal
from .._utils import pair
from ..deform_conv import _leading_block, _output_hw
from ..ms_deform_attn import ms_deform_attn as _ms_deform_attn
from ._ext import mmops_attr, psa_type_name


def roi_align(
    input: Tensor,
    rois: Tensor,
    output_size: Any,
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    pool_mode: str = "avg",
    aligned: bool = True,
) -> Tensor:
    # mmcv: any sampling_ratio <= 0 is adaptive (ceil(roi size / bins)); mmops: 0
    return torch.ops.mmops.roi_align(
        input, rois, pair(output_size), float(spatial_scale), max(int(sampling_ratio), 0), pool_mode, bool(aligned)
    )


def roi_pool(input: Tensor, rois: Tensor, output_size: Any, spatial_scale: float = 1.0) -> Tensor:
    return torch.ops.mmops.roi_pool(input, rois, pair(output_size), float(spatial_scale))


def _check_4d(input: Optional[Tensor]) -> None:
    if input is not None and input.dim() != 4:
        raise ValueError(f"Expected 4D tensor as input, got {input.dim()}D tensor instead.")


def deform_conv2d(
    input: Tensor,
    offset: Tensor,
    weight: Tensor,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    deform_groups: int = 1,
    bias: bool = False,
    im2col_step: int = 32,
) -> Tensor:
    """mmcv's order (bias is the flag False, ninth); im2col_step is accepted and
    unused (mmops chunks the batch by memory)."""
    _check_4d(input)
    if bias is not False:
        raise ValueError(f"mmcv.ops.deform_conv2d: only bias=False is supported (as in mmcv), got {bias!r}")
    input = input.type_as(offset)  # mmcv runs in offset's dtype
    weight = weight.type_as(input)
    return _deform.deform_conv2d(input, offset, weight, None, stride, padding, dilation, groups, deform_groups)


def modulated_deform_conv2d(
    input: Tensor,
    offset: Tensor,
    mask: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    deform_groups: int = 1,
) -> Tensor:
    _check_4d(input)
    input = input.type_as(offset)
    taps = int(deform_groups) * weight.size(2) * weight.size(3)
    # mmcv's reading of a larger offset / mask (DyHead): see mmops.ModulatedDeformConv2d
    out_hw = _output_hw(input, weight, pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation"))
    offset = _leading_block(offset, 2 * taps, out_hw)
    mask = _leading_block(mask, taps, out_hw)
    weight = weight.type_as(input)
    bias = bias.type_as(input) if bias is not None else None
    return _deform.modulated_deform_conv2d(
        input, offset, mask.type_as(input), weight, bias, stride, padding, dilation, groups, deform_groups
    )


def ms_deform_attn(
    value: Tensor,
    spatial_shapes: Tensor,
    level_start_index: Tensor,
    sampling_locations: Tensor,
    attention_weights: Tensor,
    im2col_step: Any = 64,
) -> Tensor:
    """MultiScaleDeformableAttnFunction.apply; im2col_step is unused."""
    return _ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations, attention_weights)


# mmcv's focal losses have mmops's signature
sigmoid_focal_loss = _focal.sigmoid_focal_loss
softmax_focal_loss = _focal.softmax_focal_loss


def carafe(features: Tensor, masks: Tensor, kernel_size: int, group_size: int, scale_factor: int) -> Tensor:
    return mmops_attr("carafe", "carafe")(features, masks, kernel_size, group_size, scale_factor)


def carafe_naive(features: Tensor, masks: Tensor, kernel_size: int, group_size: int, scale_factor: int) -> Tensor:
    return mmops_attr("carafe_naive", "carafe_naive")(features, masks, kernel_size, group_size, scale_factor)


def masked_conv2d(
    features: Tensor, mask: Tensor, weight: Tensor, bias: Tensor, padding: Any = 0, stride: Any = 1
) -> Tensor:
    return mmops_attr("masked_conv2d", "masked_conv2d")(features, mask, weight, bias, padding, stride)


def deform_roi_pool(
    input: Tensor,
    rois: Tensor,
    offset: Optional[Tensor],
    output_size: Any,
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    gamma: float = 0.1,
) -> Tensor:
    if offset is not None and offset.numel() == 0:
        offset = None  # mmcv's modules pass an empty tensor for "no offset"
    return mmops_attr("deform_roi_pool", "deform_roi_pool")(
        input, rois, offset, output_size, spatial_scale, sampling_ratio, gamma
    )


def msda_forward(
    self,
    query: Tensor,
    key: Optional[Tensor] = None,
    value: Optional[Tensor] = None,
    identity: Optional[Tensor] = None,
    query_pos: Optional[Tensor] = None,
    key_padding_mask: Optional[Tensor] = None,
    reference_points: Optional[Tensor] = None,
    spatial_shapes: Optional[Tensor] = None,
    level_start_index: Optional[Tensor] = None,
    **kwargs: Any,
) -> Tensor:
    """mmcv's MultiScaleDeformableAttention.forward on every device through
    mmops's op (mmcv runs a grid_sample composite off CUDA). Extra keyword
    arguments (mmdet passes key_pos, valid_ratios, ...) are ignored, as in mmcv."""
    from mmops.ms_deform_attn import MultiScaleDeformableAttention

    if "residual" in kwargs:  # mmcv's deprecated name of identity
        warnings.warn("MultiScaleDeformableAttention: 'residual' is deprecated, use 'identity'", DeprecationWarning)
        identity = kwargs.pop("residual")
    return MultiScaleDeformableAttention.forward(
        self,
        query,
        key,
        value,
        identity,
        query_pos,
        key_padding_mask,
        reference_points,
        spatial_shapes,
        level_start_index,
    )


# --- roi_align_rotated / riroi_align_rotated ---
def roi_align_rotated(
    input: Tensor,
    rois: Tensor,
    output_size: Any,
    spatial_scale: float,
    sampling_ratio: int = 0,
    aligned: bool = True,
    clockwise: bool = False,
) -> Tensor:
    # mmcv: any sampling_ratio <= 0 is adaptive; mmops: 0
    return torch.ops.mmops.roi_align_rotated(
        input,
        rois,
        pair(output_size),
        float(spatial_scale),
        max(int(sampling_ratio), 0),
        bool(aligned),
        bool(clockwise),
    )


def riroi_align_rotated(
    features: Tensor,
    rois: Tensor,
    out_size: Any,
    spatial_scale: float,
    num_samples: int = 0,
    num_orientations: int = 8,
    clockwise: bool = False,
) -> Tensor:
    return torch.ops.mmops.riroi_align_rotated(
        features,
        rois,
        pair(out_size, "out_size"),
        float(spatial_scale),
        max(int(num_samples), 0),
        int(num_orientations),
        bool(clockwise),
    )


# --- rotated_feature_align, active_rotated_filter ---
def rotated_feature_align(
    features: Tensor, best_rbboxes: Tensor, spatial_scale: float = 1 / 8, points: int = 1
) -> Tensor:
    return torch.ops.mmops.rotated_feature_align(features, best_rbboxes, float(spatial_scale), int(points))


def active_rotated_filter(input: Tensor, indices: Tensor) -> Tensor:
    return torch.ops.mmops.active_rotated_filter(input, indices)


# --- diff_iou_rotated ---
def diff_iou_rotated_2d(box1: Tensor, box2: Tensor) -> Tensor:
    """mmcv.ops.diff_iou_rotated_2d on every device through mmops's op (mmcv's
    composite needs its CUDA-only vertex-sorting kernel)."""
    from mmops.diff_iou_rotated import diff_iou_rotated_2d as run

    return run(box1, box2)


def diff_iou_rotated_3d(box3d1: Tensor, box3d2: Tensor) -> Tensor:
    """mmcv.ops.diff_iou_rotated_3d through mmops's op, as diff_iou_rotated_2d."""
    from mmops.diff_iou_rotated import diff_iou_rotated_3d as run

    return run(box3d1, box3d2)


# --- voxelization / dynamic_scatter ---
def voxelization(
    points: Tensor,
    voxel_size: Any,
    coors_range: Any,
    max_points: int = 35,
    max_voxels: int = 20000,
    deterministic: bool = True,
) -> Any:
    """mmcv's _Voxelization.apply: dynamic when max_points or max_voxels is -1. mmops is
    always deterministic (mmcv's deterministic=True order), whatever ``deterministic``."""
    from mmops.voxelization import voxelization as run

    return run(points, list(voxel_size), list(coors_range), int(max_points), int(max_voxels), bool(deterministic))


def dynamic_scatter(feats: Tensor, coors: Tensor, reduce_type: str = "max") -> Any:
    """mmcv's _DynamicScatter.apply: (voxel_feats, voxel_coors)."""
    return torch.ops.mmops.dynamic_scatter(feats, coors, reduce_type)


# --- assign_score_withk, chamfer_distance ---
def assign_score_withk(
    scores: Tensor, point_features: Tensor, center_features: Tensor, knn_idx: Tensor, aggregate: str = "sum"
) -> Tensor:
    return torch.ops.mmops.assign_score_withk(scores, point_features, center_features, knn_idx, aggregate)


def chamfer_distance(xyz1: Tensor, xyz2: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    dist1, dist2, idx1, idx2 = torch.ops.mmops.chamfer_distance(xyz1, xyz2)
    return dist1, dist2, idx1, idx2


# --- ball_query / knn / three_nn / three_interpolate ---
# mmops' wrappers take mmcv's Function.apply arguments as they are (ball_query: stacked
# when both counts are given, else dense, as mmcv decides).
from ..neighbors import ball_query, knn, three_nn  # noqa: E402, F401
from ..three_interpolate import three_interpolate  # noqa: E402, F401


# --- furthest_point_sample, gather_points, group_points ---
def furthest_point_sample(points_xyz: Tensor, num_points: int) -> Tensor:
    return torch.ops.mmops.furthest_point_sample(points_xyz, int(num_points))


def furthest_point_sample_with_dist(points_dist: Tensor, num_points: int) -> Tensor:
    return torch.ops.mmops.furthest_point_sample_with_dist(points_dist, int(num_points))


def gather_points(features: Tensor, indices: Tensor) -> Tensor:
    return torch.ops.mmops.gather_points(features, indices)


def grouping_operation(*args: Any) -> Tensor:
    """mmcv's GroupingOperation.apply (features, indices[, features_batch_cnt, indices_batch_cnt])."""
    from mmops.group_points import grouping_operation as run

    return run(*args)


# --- iou3d (boxes_overlap_bev, boxes_iou_bev, nms_bev, nms_normal_bev) ---
# mmops.iou3d's wrappers take mmcv's arguments: they replace mmcv's functions as they are.
from ..iou3d import boxes_iou_bev, boxes_overlap_bev, nms_bev, nms_normal_bev  # noqa: E402,F401


# --- points_in_boxes, roiaware_pool3d, roipoint_pool3d ---
def points_in_boxes_part(points: Tensor, boxes: Tensor) -> Tensor:
    return torch.ops.mmops.points_in_boxes_part(points, boxes)


def points_in_boxes_all(points: Tensor, boxes: Tensor) -> Tensor:
    return torch.ops.mmops.points_in_boxes_all(points, boxes)


def points_in_boxes_cpu(points: Tensor, boxes: Tensor) -> Tensor:
    """mmcv computes it in float32: so does this."""
    return torch.ops.mmops.points_in_boxes_all(points.float(), boxes.float())


_ROIAWARE_MODES = {0: "max", 1: "avg"}


def roiaware_pool3d(
    rois: Tensor, pts: Tensor, pts_feature: Tensor, out_size: Any, max_pts_per_voxel: int, mode: int
) -> Tensor:
    """mmcv's RoIAwarePool3dFunction.apply: mode 0 (max) or 1 (avg)."""
    from mmops.roiaware_pool3d import roiaware_pool3d as run

    if int(mode) not in _ROIAWARE_MODES:
        raise ValueError(f"mmcv.ops.RoIAwarePool3d: mode must be 0 (max) or 1 (avg), got {mode}")
    return run(rois, pts, pts_feature, out_size, int(max_pts_per_voxel), _ROIAWARE_MODES[int(mode)])


def roipoint_pool3d(
    points: Tensor, point_features: Tensor, boxes3d: Tensor, num_sampled_points: int = 512
) -> "tuple[Tensor, Tensor]":
    """mmcv's RoIPointPool3dFunction.apply (boxes3d viewed as [B, -1, 7] as mmcv does)."""
    boxes = boxes3d.view(points.shape[0], -1, 7)
    return torch.ops.mmops.roipoint_pool3d(points, point_features, boxes, int(num_sampled_points))


# --- psa_mask ---
def psa_mask(input: Tensor, psa_type: Any, mask_size: Any) -> Tensor:
    """mmcv's PSAMaskFunction.apply: psa_type 0 / "collect" or 1 / "distribute"."""
    return torch.ops.mmops.psa_mask(input, psa_type_name(psa_type), pair(mask_size, "mask_size"))


# --- cc_attention ---
def cc_attention_forward(self, x: Tensor) -> Tensor:
    """mmcv's CrissCrossAttention.forward through mmops's ca_weight / ca_map (mmcv 2.x runs an
    einsum composite with a -inf diagonal; the result is the same, docs/ops/cc_attention.md)."""
    from mmops.cc_attention import CrissCrossAttention

    return CrissCrossAttention.forward(self, x)


# --- corner_pool ---
_CORNER_POOL_DIM_FLIP = {"bottom": (2, False), "left": (3, True), "right": (3, False), "top": (2, True)}


def corner_pool_forward(self, x: Tensor) -> Tensor:
    """mmcv's CornerPool.forward: mmops's op on floating [N, C, H, W] input (the same values
    and gradients as mmcv's cummax composite, in one kernel each way); anything else (the
    integer tensors of mmcv's own tests) runs mmcv's composite."""
    if x.is_floating_point() and x.dim() == 4:
        return torch.ops.mmops.corner_pool(x, self.mode)
    dim, flip = _CORNER_POOL_DIM_FLIP[self.mode]
    out, _ = torch.cummax(x.flip(dim) if flip else x, dim)
    return out.flip(dim) if flip else out


# --- border_align ---
def border_align(input: Tensor, boxes: Tensor, pool_size: Any) -> Tensor:
    """mmcv's BorderAlignFunction.apply(input, boxes, pool_size)."""
    return torch.ops.mmops.border_align(input, boxes, int(pool_size))


# --- bezier_align ---
def bezier_align(
    input: Tensor,
    beziers: Tensor,
    output_size: Any,
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    aligned: bool = True,
) -> Tensor:
    """mmcv's BezierAlignFunction.apply(input, beziers, output_size, spatial_scale,
    sampling_ratio, aligned); any sampling_ratio <= 0 is adaptive, as in mmcv."""
    return torch.ops.mmops.bezier_align(
        input, beziers, pair(output_size), float(spatial_scale), int(sampling_ratio), bool(aligned)
    )


# --- prroi_pool ---
def prroi_pool(features: Tensor, rois: Tensor, output_size: Any, spatial_scale: float) -> Tensor:
    """mmcv's PrRoIPoolFunction.apply(features, rois, output_size, spatial_scale); the
    gradient of rois is the true one (mmcv's backward writes it into grad_input)."""
    return torch.ops.mmops.prroi_pool(features, rois, pair(output_size), float(spatial_scale))


# --- tin_shift ---
def tin_shift(input: Tensor, shift: Tensor) -> Tensor:
    """mmcv's TINShiftFunction.apply(input, shift): mmcv's ValueErrors for a batch mismatch
    and for C not a multiple of G, then mmops (the true gradient: grad_output moved by
    -shift, where mmcv's kernel moves it by +shift; docs/ops/tin_shift.md)."""
    if input.size(0) != shift.size(0):
        raise ValueError(
            f"The first dim (batch) of `input` and `shift` should be same, but got {input.size(0)} and {shift.size(0)}."
        )
    channels, groups = input.size(2), shift.size(1)
    if groups <= 0 or channels // groups <= 0 or channels % groups != 0:
        raise ValueError(f"C should be a multiple of num_segments, but got C={channels} and num_segments={groups}.")
    return torch.ops.mmops.tin_shift(input, shift)


# --- correlation ---
def correlation(
    input1: Tensor,
    input2: Tensor,
    kernel_size: Any = 1,
    max_displacement: int = 1,
    stride: Any = 1,
    padding: Any = 1,
    dilation: Any = 1,
    dilation_patch: Any = 1,
) -> Tensor:
    """mmcv's CorrelationFunction.apply(input1, input2, kernel_size, max_displacement,
    stride, padding, dilation, dilation_patch) (its Function's padding default is 1)."""
    return torch.ops.mmops.correlation(
        input1,
        input2,
        pair(kernel_size),
        int(max_displacement),
        pair(stride),
        pair(padding),
        pair(dilation),
        pair(dilation_patch),
    )


# --- upfirdn2d ---
def upfirdn2d(
    input: Tensor,
    filter: Optional[Tensor],
    up: Any = 1,
    down: Any = 1,
    padding: Any = 0,
    flip_filter: bool = False,
    gain: Any = 1,
    use_custom_op: bool = True,
) -> Tensor:
    """mmcv.ops.upfirdn2d (mmcv 2.x: filter [fh, fw], [taps] or None; padding int, [x, y]
    or [x0, x1, y0, y1]) on every device through mmops's op, differentiable to any order;
    use_custom_op is accepted and ignored (mmops is the custom op)."""
    from mmops.upfirdn2d import upfirdn2d as run

    return run(input, filter, up, down, padding, bool(flip_filter), float(gain))


# --- fused_bias_leakyrelu ---
def fused_bias_leakyrelu(input: Tensor, bias: Tensor, negative_slope: float = 0.2, scale: float = 2**0.5) -> Tensor:
    """mmcv.ops.fused_bias_leakyrelu (and FusedBiasLeakyReLUFunction.apply) on every device
    through mmops's op (mmcv: CUDA; its CPU path is a composite), differentiable to any order."""
    from mmops.fused_bias_leakyrelu import fused_bias_leakyrelu as run

    return run(input, bias, float(negative_slope), float(scale))


# --- filtered_lrelu ---
def filtered_lrelu(
    input: Tensor,
    filter_up: Optional[Tensor] = None,
    filter_down: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    up: int = 1,
    down: int = 1,
    padding: Any = 0,
    gain: float = 2**0.5,
    slope: float = 0.2,
    clamp: Optional[float] = None,
    flip_filter: bool = False,
    use_custom_op: bool = True,
) -> Tensor:
    """mmcv.ops.filtered_lrelu (StyleGAN3; filters [fh, fw], [taps] or None; padding int,
    [x, y] or [x0, x1, y0, y1]) on every device through mmops's op (mmcv: a CUDA kernel for
    float16 / float32, else its composite), differentiable w.r.t. input and bias, the
    gradient again to any order; use_custom_op is accepted and ignored."""
    from mmops.filtered_lrelu import filtered_lrelu as run

    return run(
        input,
        filter_up,
        filter_down,
        bias,
        int(up),
        int(down),
        padding,
        float(gain),
        float(slope),
        clamp,
        bool(flip_filter),
    )


# --- bias_act ---
def bias_act(
    input: Tensor,
    bias: Optional[Tensor] = None,
    dim: int = 1,
    act: str = "linear",
    alpha: Any = None,
    gain: Optional[float] = None,
    clamp: Optional[float] = None,
    use_custom_op: bool = True,
) -> Tensor:
    """mmcv.ops.bias_act on every device through mmops's op (mmcv: CUDA; its CPU path is a
    composite), first and second order; bias is cast to input's dtype (mmcv's composite
    promotes, its kernel requires the same dtype); use_custom_op is accepted and ignored."""
    from mmops.bias_act import bias_act as run

    if bias is not None:
        bias = bias.to(input.dtype)
    return run(input, bias, dim, act, alpha, gain, clamp)
