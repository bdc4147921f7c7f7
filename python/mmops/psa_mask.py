"""psa_mask: the functional wrapper (mmcv.ops.psa_mask) and PSAMask."""

from typing import List, Tuple, Union

import torch
from torch import Tensor, nn

from ._utils import pair


def psa_mask(input: Tensor, psa_type: str, mask_size: List[int]) -> Tensor:
    """PSANet's point-wise spatial attention masks with mmcv's semantics (docs/ops/psa_mask.md).

    input: [N, mask_h * mask_w, H, W], a mask_h x mask_w attention mask centred on
    every pixel; psa_type: "collect" or "distribute"; mask_size: [mask_h, mask_w].
    Returns [N, H * W, H, W]: mask entry (i, j) of pixel (h, w) belongs to pixel
    (y, x) = (h + i - (mask_h - 1) // 2, w + j - (mask_w - 1) // 2) and goes to
    [y * W + x, h, w] (collect) or [h * W + w, y, x] (distribute); zeros elsewhere.
    Differentiable w.r.t. input.
    """
    return torch.ops.mmops.psa_mask(input, psa_type, mask_size)


class PSAMask(nn.Module):
    """mmcv's PSAMask: psa_type "collect" or "distribute", mask_size an int or (h, w)."""

    def __init__(self, psa_type: str, mask_size: Union[int, Tuple[int, int], List[int]]) -> None:
        super().__init__()
        if psa_type not in ("collect", "distribute"):
            raise ValueError(f'PSAMask: psa_type must be "collect" or "distribute", but got {psa_type!r}')
        self.psa_type = psa_type
        self.mask_size: List[int] = pair(mask_size, "mask_size")

    def forward(self, input: Tensor) -> Tensor:
        return psa_mask(input, self.psa_type, self.mask_size)

    def extra_repr(self) -> str:
        return f"psa_type={self.psa_type}, mask_size={tuple(self.mask_size)}"


__all__ = ["psa_mask", "PSAMask"]
