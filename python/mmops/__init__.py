"""mmops: detection / segmentation / 3D operators for PyTorch, in C++ and CUDA.

Importing this package loads libmmops.so, which registers the operators under
torch.ops.mmops (usable from eager mode, TorchScript, torch.compile and
torch.export). This package adds functional wrappers and nn.Modules.
"""

import torch

__version__ = "0.1.0"

from ._loader import load_library

library_path = load_library()

from .ops import multi_level_roi_align, roi_align  # noqa: E402
from .modules import MultiLevelRoIAlign, RoIAlign  # noqa: E402
from .detection_ops import roi_pool, sigmoid_focal_loss, softmax_focal_loss  # noqa: E402
from .detection_modules import RoIPool, SigmoidFocalLoss, SoftmaxFocalLoss  # noqa: E402
from .nms_ops import batched_nms, bbox_overlaps, nms, soft_nms  # noqa: E402
from .deform_conv_ops import (DeformConv2d, DeformConv2dPack, ModulatedDeformConv2d,  # noqa: E402
                              ModulatedDeformConv2dPack, deform_conv2d, modulated_deform_conv2d)
from .ms_deform_attn_ops import MultiScaleDeformableAttention, ms_deform_attn  # noqa: E402


def set_strict_index_check(enabled: bool) -> None:
    """Turns the strict CUDA index check on or off (see README: "Indices in tensor data")."""
    torch.ops.mmops._set_strict_index_check(bool(enabled))


def strict_index_check() -> bool:
    """Whether CUDA ops validate indices held in tensor data synchronously."""
    return bool(torch.ops.mmops._strict_index_check())


__all__ = ["__version__", "roi_align", "RoIAlign", "multi_level_roi_align", "MultiLevelRoIAlign", "set_strict_index_check", "strict_index_check", "library_path",
           "roi_pool", "RoIPool", "sigmoid_focal_loss", "SigmoidFocalLoss", "softmax_focal_loss",
           "SoftmaxFocalLoss",
           "nms", "batched_nms", "soft_nms", "bbox_overlaps",
           "deform_conv2d", "modulated_deform_conv2d", "DeformConv2d", "DeformConv2dPack",
           "ModulatedDeformConv2d", "ModulatedDeformConv2dPack",
           "ms_deform_attn", "MultiScaleDeformableAttention"]
