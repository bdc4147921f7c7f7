"""float64 reference of carafe in plain torch (F.unfold + einsum), shared by the tests and
the benchmark. Differentiable: its autograd gradients are the reference gradients."""

import torch
import torch.nn.functional as F
from torch import Tensor


def carafe_reference(features: Tensor, masks: Tensor, kernel_size: int, group_size: int, scale_factor: int) -> Tensor:
    """out[n, c, ho, wo] = sum over (ky, kx) of features[n, c, ho // s + ky - r, wo // s + kx - r]
    (zero outside) * masks[n, g * k * k + ky * k + kx, ho, wo], g = c // (C // G), r = (k - 1) // 2,
    in the dtype of the inputs (float64 for a reference)."""
    n, c, h, w = features.shape
    k, g, s = kernel_size, group_size, scale_factor
    # [N, C * k * k, H * W], channel-major, then ky, kx: the k x k windows around each pixel
    windows = F.unfold(features, k, padding=(k - 1) // 2).view(n, g, c // g, k * k, h, w)
    # every output pixel reads the window of its source pixel (ho // s, wo // s)
    windows = windows.repeat_interleave(s, dim=4).repeat_interleave(s, dim=5)
    weights = masks.view(n, g, k * k, h * s, w * s)
    return torch.einsum("ngctyx,ngtyx->ngcyx", windows, weights).reshape(n, c, h * s, w * s)


def random_masks(n: int, kernel_size: int, group_size: int, h: int, w: int, generator=None, dtype=torch.float64):
    """Masks as CARAFEPack feeds them: a softmax over the k * k taps of each group."""
    logits = torch.randn(n, group_size, kernel_size * kernel_size, h, w, generator=generator, dtype=torch.float64)
    return logits.softmax(dim=2).reshape(n, -1, h, w).to(dtype)
