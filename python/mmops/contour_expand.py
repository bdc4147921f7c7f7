"""contour_expand: the functional wrapper (mmcv.ops.contour_expand, as a tensor)."""

from typing import Any

import torch
from torch import Tensor


def _as_tensor(value: Any) -> Tensor:
    return value if isinstance(value, Tensor) else torch.from_numpy(value)


def contour_expand(
    kernel_mask: Any, internal_kernel_label: Any, min_kernel_area: int, kernel_num: int, progressive: bool = False
) -> Tensor:
    """PSENet's scale expansion (docs/ops/contour_expand.md).

    kernel_mask: [K, H, W] uint8 / bool, the text kernels, largest first;
    internal_kernel_label: [H, W] int32, the components of the smallest kernel, labels in
    [0, kernel_num] (0: background); tensors or numpy arrays. Labels covering fewer than
    min_kernel_area pixels are dropped; the others grow breadth-first, each pixel going
    to the first label that reaches it. progressive=False gives mmcv's result (one flood
    into kernel_mask[0]); True PSENet's rounds into kernel_mask[K-2], ..., [0].
    Returns the int32 [H, W] label map (mmcv returns it as a list of rows: ``.tolist()``).
    """
    return torch.ops.mmops.contour_expand(
        _as_tensor(kernel_mask), _as_tensor(internal_kernel_label), int(min_kernel_area), int(kernel_num), progressive
    )


__all__ = ["contour_expand"]
