"""Helpers shared by the op families' Python modules."""

from typing import List, Tuple, Union

import torch
from torch import Tensor

IntPair = Union[int, Tuple[int, int], List[int]]


def pair(value: IntPair, name: str = "output_size") -> List[int]:
    """[h, w] from an int or a pair; `name` is the argument named in the error."""
    if isinstance(value, int):
        return [value, value]
    # Two spellings of one conversion: TorchScript iterates a list or a tuple,
    # not their Union, so each branch refines the type first. The message names
    # `given`, not the refined `value`: TorchScript cannot save (serialize) a
    # refined variable that is used after its branches.
    given = value
    values = [int(v) for v in value] if isinstance(value, list) else [int(v) for v in value]
    if len(values) != 2:
        raise ValueError(f"mmops: {name} must be an int or a pair, got {given}")
    return values


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
