"""Fake (meta) kernels registered from Python: only for ops whose output size
depends on the data (an unbacked size, which C++ meta kernels cannot create).
Every other op has its Meta kernel in C++ (src/<family>/<family>_meta.cpp).

A fake kernel validates its arguments through the op's validation-only schema
(e.g. mmops::_nms_check, src/nms/nms.cpp), which runs the checks of the CPU and
CUDA kernels: fake tensors raise the errors of eager mode.
"""

from typing import Tuple

import torch
from torch import Tensor

# nms-like ops return as many rows as boxes survive: an unbacked size.


def _kept_count():
    return torch.library.get_ctx().new_dynamic_size()


@torch.library.register_fake("mmops::nms")
def _nms_fake(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    torch.ops.mmops._nms_check(boxes, scores, iou_threshold)
    return boxes.new_empty((_kept_count(),), dtype=torch.long)


@torch.library.register_fake("mmops::batched_nms")
def _batched_nms_fake(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    torch.ops.mmops._batched_nms_check(boxes, scores, idxs, iou_threshold)
    return boxes.new_empty((_kept_count(),), dtype=torch.long)


@torch.library.register_fake("mmops::soft_nms")
def _soft_nms_fake(
    boxes: Tensor,
    scores: Tensor,
    iou_threshold: float = 0.3,
    sigma: float = 0.5,
    min_score: float = 1e-3,
    method: str = "linear",
) -> Tuple[Tensor, Tensor]:
    torch.ops.mmops._soft_nms_check(boxes, scores, iou_threshold, sigma, min_score, method)
    k = _kept_count()
    return boxes.new_empty((k, 5)), boxes.new_empty((k,), dtype=torch.long)


# --- box_iou_rotated / nms_rotated ---
from typing import Optional  # noqa: E402


@torch.library.register_fake("mmops::nms_rotated")
def _nms_rotated_fake(
    boxes: Tensor, scores: Tensor, iou_threshold: float, labels: Optional[Tensor] = None, clockwise: bool = True
) -> Tensor:
    torch.ops.mmops._nms_rotated_check(boxes, scores, iou_threshold, labels, clockwise)
    return boxes.new_empty((_kept_count(),), dtype=torch.long)


@torch.library.register_fake("mmops::nms_quadri")
def _nms_quadri_fake(boxes: Tensor, scores: Tensor, iou_threshold: float, labels: Optional[Tensor] = None) -> Tensor:
    torch.ops.mmops._nms_quadri_check(boxes, scores, iou_threshold, labels)
    return boxes.new_empty((_kept_count(),), dtype=torch.long)


# --- voxelization: hard_voxelize and dynamic_scatter return as many voxels as the data holds ---
from typing import List  # noqa: E402


@torch.library.register_fake("mmops::hard_voxelize")
def _hard_voxelize_fake(
    points: Tensor, voxel_size: List[float], coors_range: List[float], max_points: int = 35, max_voxels: int = 20000
) -> Tuple[Tensor, Tensor, Tensor]:
    torch.ops.mmops._hard_voxelize_check(points, voxel_size, coors_range, max_points, max_voxels)
    m = _kept_count()
    int32 = torch.int32
    return (
        points.new_empty((m, max_points, points.shape[1])),
        points.new_empty((m, 3), dtype=int32),
        points.new_empty((m,), dtype=int32),
    )


def _scatter_outputs(feats: Tensor, coors: Tensor, reduce: str) -> Tuple[Tensor, Tensor]:
    torch.ops.mmops._dynamic_scatter_check(feats, coors, reduce)
    m = _kept_count()
    return feats.new_empty((m, feats.shape[1])), coors.new_empty((m, coors.shape[1]))


@torch.library.register_fake("mmops::dynamic_scatter")
def _dynamic_scatter_fake(feats: Tensor, coors: Tensor, reduce: str = "max") -> Tuple[Tensor, Tensor]:
    return _scatter_outputs(feats, coors, reduce)


@torch.library.register_fake("mmops::_dynamic_scatter_forward")
def _dynamic_scatter_forward_fake(
    feats: Tensor, coors: Tensor, reduce: str
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    voxel_feats, voxel_coors = _scatter_outputs(feats, coors, reduce)
    m, int32 = voxel_feats.shape[0], torch.int32
    argmax_rows = m if reduce == "max" else 0
    return (
        voxel_feats,
        voxel_coors,
        feats.new_empty((feats.shape[0],), dtype=int32),
        feats.new_empty((m,), dtype=int32),
        feats.new_empty((argmax_rows, feats.shape[1]), dtype=int32),
    )


# --- iou3d (nms_bev, nms_normal_bev) ---


@torch.library.register_fake("mmops::nms_bev")
def _nms_bev_fake(
    boxes: Tensor,
    scores: Tensor,
    thresh: float,
    pre_max_size: Optional[int] = None,
    post_max_size: Optional[int] = None,
) -> Tensor:
    torch.ops.mmops._nms_bev_check(boxes, scores, thresh, pre_max_size, post_max_size)
    return boxes.new_empty((_kept_count(),), dtype=torch.long)


@torch.library.register_fake("mmops::nms_normal_bev")
def _nms_normal_bev_fake(boxes: Tensor, scores: Tensor, thresh: float) -> Tensor:
    torch.ops.mmops._nms_normal_bev_check(boxes, scores, thresh)
    return boxes.new_empty((_kept_count(),), dtype=torch.long)
