"""Helpers shared by the op families' Python modules."""

from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor

IntPair = Union[int, Tuple[int, int], List[int]]


def pair(value: IntPair, name: str = "output_size") -> List[int]:
    """[h, w] from an int or a pair; `name` is the argument named in the error."""
    if isinstance(value, int):
        return [value, value]
    # TorchScript iterates a list or a tuple but not their Union: each branch
    # refines the type first, and nothing of the refined type outlives it
    # (a scripted module that would join the two types saves but fails to load).
    if isinstance(value, list):
        values = [int(v) for v in value]
        text = str(value)
    else:
        values = [int(v) for v in value]
        text = str(value)
    if len(values) != 2:
        raise ValueError(f"mmops: {name} must be an int or a pair, got {text}")
    return values


def fir_padding(padding: Union[int, List[int]], op: str) -> List[int]:
    """[x0, x1, y0, y1] from an int, a pair [x, y] or four values: mmcv's padding of the FIR
    ops (upfirdn2d, filtered_lrelu); `op` is named in the error."""
    if isinstance(padding, int):
        return [padding, padding, padding, padding]
    values = [int(v) for v in padding]
    if len(values) == 2:
        return [values[0], values[0], values[1], values[1]]
    if len(values) != 4:
        raise ValueError(f"mmops.{op}: padding must be an int, [x, y] or [x0, x1, y0, y1], got {values}")
    return values


def fir_filter_2d(filter: Optional[Tensor], device: torch.device, flip: bool, gain: float) -> Tensor:
    """The 2-D filter the FIR ops take, from mmcv's [fh, fw] (non-separable), [taps]
    (separable: the same taps along x and y) or None (identity), flipped for correlation
    (mmcv's flip_filter), times gain."""
    if filter is None:
        f = torch.ones(1, 1, dtype=torch.float32, device=device)
    elif filter.dim() == 1:
        f = torch.outer(filter, filter)
    else:
        f = filter
    if flip:
        f = f.flip([0, 1])
    if gain != 1:
        f = f * gain
    return f


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
