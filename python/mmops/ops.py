"""Functional wrappers around torch.ops.mmops."""

from typing import List, Tuple, Union

import torch
from torch import Tensor


def _pair(size: Union[int, Tuple[int, int], List[int]]) -> List[int]:
    if isinstance(size, int):
        return [size, size]
    size = [int(s) for s in size]
    if len(size) != 2:
        raise ValueError(f"mmops: output_size must be an int or a pair, got {size}")
    return size


def boxes_to_rois(boxes: Union[Tensor, List[Tensor]]) -> Tensor:
    """[K, 5] rois from a [K, 5] tensor or from a list of per-image [Ki, 4] boxes."""
    if isinstance(boxes, Tensor):
        return boxes
    if len(boxes) == 0:
        raise ValueError("mmops: boxes is an empty list; pass a [0, 5] tensor for no rois")
    for i, b in enumerate(boxes):
        if b.dim() != 2 or b.size(1) != 4:
            raise ValueError(f"mmops: boxes[{i}] must have shape [Ki, 4], got {list(b.shape)}")
    flat = torch.cat(boxes, dim=0)
    index = torch.cat(
        [torch.full((b.size(0), 1), i, dtype=flat.dtype, device=flat.device) for i, b in enumerate(boxes)],
        dim=0,
    )
    return torch.cat([index, flat], dim=1)


def roi_align(
    input: Tensor,
    boxes: Union[Tensor, List[Tensor]],
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    pool_mode: str = "avg",
    aligned: bool = True,
) -> Tensor:
    """RoIAlign with mmcv semantics (see README).

    input: [N, C, H, W]; boxes: [K, 5] (batch_index, x1, y1, x2, y2) or a list of
    per-image [Ki, 4] boxes (x1, y1, x2, y2) in image coordinates.
    Returns [K, C, out_h, out_w].
    """
    return torch.ops.mmops.roi_align(
        input, boxes_to_rois(boxes), _pair(output_size), float(spatial_scale), int(sampling_ratio),
        pool_mode, bool(aligned)
    )


def multi_level_roi_align(
    features: List[Tensor],
    boxes: Union[Tensor, List[Tensor]],
    output_size: Union[int, Tuple[int, int], List[int]],
    spatial_scales: List[float],
    sampling_ratio: int = 0,
    pool_mode: str = "avg",
    aligned: bool = True,
    finest_scale: int = 56,
) -> Tensor:
    """FPN RoIAlign in one launch (see README).

    Each roi goes to level floor(log2(sqrt(w * h) / finest_scale + 1e-6)),
    clamped to the levels given (mmdet's rule), and is pooled from that map.
    features: L maps [N, C, H_l, W_l]; spatial_scales: one per map.
    """
    return torch.ops.mmops.multi_level_roi_align(
        features, boxes_to_rois(boxes), _pair(output_size), [float(s) for s in spatial_scales],
        int(sampling_ratio), pool_mode, bool(aligned), int(finest_scale)
    )


__all__ = ["roi_align", "multi_level_roi_align"]
