"""pixel_group: the functional wrapper (mmcv.ops.pixel_group's lists) over the op's tensors."""

from typing import Any, List

import torch
from torch import Tensor


def _as_tensor(value: Any) -> Tensor:
    return value if isinstance(value, Tensor) else torch.from_numpy(value)


def pixel_group_lists(labels: Tensor, scores: Tensor, counts: Tensor) -> List[List[float]]:
    """mmcv's result from the op's outputs: for each label l in [0, R) the list [mean
    score, pixel count, x0, y0, x1, y1, ...] (its pixels in raster order; label 0: [0, 0]),
    float32 values as Python floats."""
    width = labels.shape[1]
    flat = labels.reshape(-1).cpu()
    order = torch.sort(flat, stable=True)[1]  # by label, raster order within one
    coords = torch.stack((order % width, order // width), 1).to(torch.float32)
    means = scores.detach().cpu().to(torch.float32).tolist()
    sizes = counts.cpu().tolist()
    start = int((flat <= 0).sum())  # the background comes first
    out = []
    for label, (mean, size) in enumerate(zip(means, sizes)):
        row = [mean, float(torch.tensor(size, dtype=torch.float32))]
        if label > 0:
            row += coords[start : start + size].reshape(-1).tolist()
            start += size
        out.append(row)
    return out


def pixel_group(
    score: Any,
    mask: Any,
    embedding: Any,
    kernel_label: Any,
    kernel_contour: Any,
    kernel_region_num: int,
    distance_threshold: float,
) -> List[List[float]]:
    """PAN's pixel aggregation with mmcv's result (docs/ops/pixel_group.md).

    score: [H, W] floating; mask: [H, W] bool; embedding: [H, W, C] (score's dtype);
    kernel_label: [H, W] int32, 0 or in [1, kernel_region_num); kernel_contour: [H, W]
    uint8 / bool; tensors or numpy arrays. Kernels grow breadth-first from their contour
    pixels into masked pixels whose embedding lies within distance_threshold of the
    kernel's mean embedding. Returns mmcv's list: for each label [mean score, pixel
    count, x0, y0, x1, y1, ...]. torch.ops.mmops.pixel_group returns the tensors
    (labels [H, W], scores [R], counts [R]) instead, on the input's device.
    """
    labels, scores, counts = torch.ops.mmops.pixel_group(
        _as_tensor(score),
        _as_tensor(mask),
        _as_tensor(embedding),
        _as_tensor(kernel_label),
        _as_tensor(kernel_contour),
        int(kernel_region_num),
        float(distance_threshold),
    )
    return pixel_group_lists(labels, scores, counts)


__all__ = ["pixel_group", "pixel_group_lists"]
