"""mmops.tv: torchvision.ops' interface on mmops' kernels.

Switch by changing the import: ``from mmops import tv as ops`` in place of
``from torchvision import ops``. Names, signatures, defaults, module reprs and
results follow torchvision (docs/torchvision.md lists what differs). Not merged into
the ``mmops`` namespace: ``mmops.roi_align`` keeps mmcv's conventions.
"""

from ._boxes import batched_nms, box_area, box_convert, box_iou, generalized_box_iou, nms
from ._deform import DeformConv2d, deform_conv2d
from ._poolers import LevelMapper, MultiScaleRoIAlign
from ._roi import RoIAlign, RoIPool, roi_align, roi_pool

__all__ = [
    "roi_align",
    "roi_pool",
    "RoIAlign",
    "RoIPool",
    "MultiScaleRoIAlign",
    "LevelMapper",
    "nms",
    "batched_nms",
    "box_iou",
    "box_area",
    "box_convert",
    "generalized_box_iou",
    "deform_conv2d",
    "DeformConv2d",
]
