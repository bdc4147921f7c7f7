"""MultiScaleRoIAlign with torchvision's interface, level rule and scale inference.

Each box goes to the FPN level floor(canonical_level + log2(sqrt(area) / canonical_scale)
+ eps), clamped to the levels present, and is pooled by mmops' roi_align from that
level's map. mmops' multi_level_roi_align is not used: its rule (mmdet's) puts the eps
inside the log, so a box just below a level boundary could go to another level than torchvision's.
"""

from typing import Dict, List, Optional, Tuple, Union

import torch
import torch.fx
from torch import Tensor, nn

from .._utils import boxes_to_rois
from ._boxes import box_area
from ._roi import roi_align


class LevelMapper:
    """torchvision's LevelMapper: the level index (0 = k_min) of every box of boxlists."""

    def __init__(self, k_min: int, k_max: int, canonical_scale: int = 224, canonical_level: int = 4, eps: float = 1e-6):
        self.k_min = k_min
        self.k_max = k_max
        self.s0 = canonical_scale
        self.lvl0 = canonical_level
        self.eps = eps

    def __call__(self, boxlists: List[Tensor]) -> Tensor:
        s = torch.sqrt(torch.cat([box_area(b) for b in boxlists]))
        # the same operations in the same order as torchvision, for the same floor
        level = torch.floor(self.lvl0 + torch.log2(s / self.s0) + torch.tensor(self.eps, dtype=s.dtype))
        level = torch.clamp(level, min=self.k_min, max=self.k_max)
        return level.to(torch.int64) - self.k_min


def _infer_scale(feature: Tensor, original_size: List[int]) -> float:
    """The power of two nearest to feature height / image height (torchvision's rule)."""
    approx = float(feature.shape[-2]) / float(original_size[0])
    return 2 ** float(torch.tensor(approx).log2().round())


@torch.fx.wrap
def _setup_scales(
    features: List[Tensor], image_shapes: List[Tuple[int, int]], canonical_scale: int, canonical_level: int
) -> Tuple[List[float], LevelMapper]:
    if len(image_shapes) == 0:
        raise ValueError("mmops.tv.MultiScaleRoIAlign: image_shapes is empty")
    max_h = 0
    max_w = 0
    for shape in image_shapes:
        max_h = max(shape[0], max_h)
        max_w = max(shape[1], max_w)
    scales = [_infer_scale(f, [max_h, max_w]) for f in features]
    k_min = -torch.log2(torch.tensor(scales[0], dtype=torch.float32)).item()
    k_max = -torch.log2(torch.tensor(scales[-1], dtype=torch.float32)).item()
    return scales, LevelMapper(int(k_min), int(k_max), canonical_scale, canonical_level)


@torch.fx.wrap
def _filter_input(x: Dict[str, Tensor], featmap_names: List[str]) -> List[Tensor]:
    """The maps of x named in featmap_names, in x's order (as torchvision)."""
    maps: List[Tensor] = []
    for k, v in x.items():
        if k in featmap_names:
            maps.append(v)
    return maps


@torch.fx.wrap
def _multiscale_roi_align(
    features: List[Tensor],
    boxes: List[Tensor],
    output_size: List[int],
    sampling_ratio: int,
    scales: List[float],
    mapper: LevelMapper,
) -> Tensor:
    rois = boxes_to_rois(boxes)
    if len(features) == 1:
        return roi_align(features[0], rois, output_size, scales[0], sampling_ratio)
    levels = mapper(boxes)
    first = features[0]
    result = first.new_zeros([rois.size(0), first.size(1), output_size[0], output_size[1]])
    for level, (feature, scale) in enumerate(zip(features, scales)):
        members = torch.where(levels == level)[0]
        pooled = roi_align(feature, rois[members], output_size, scale, sampling_ratio)
        # under autocast the levels may come in different dtypes: the result has the first's
        result[members] = pooled.to(result.dtype)
    return result


class MultiScaleRoIAlign(nn.Module):
    """torchvision.ops.MultiScaleRoIAlign: RoIAlign (aligned=False) of each box from its
    FPN level. forward(x: dict of maps [N, C, H_l, W_l], boxes: list of per-image [Ki, 4]
    boxes in image coordinates, image_shapes: list of (height, width)) -> [K, C, oh, ow].
    The scales and the level range are inferred on the first call and kept."""

    scales: Optional[List[float]]
    map_levels: Optional[LevelMapper]

    def __init__(
        self,
        featmap_names: List[str],
        output_size: Union[int, Tuple[int, int], List[int]],
        sampling_ratio: int,
        *,
        canonical_scale: int = 224,
        canonical_level: int = 4,
    ):
        super().__init__()
        if isinstance(output_size, int):
            output_size = (output_size, output_size)
        self.featmap_names = featmap_names
        self.sampling_ratio = sampling_ratio
        self.output_size = tuple(output_size)
        self.scales = None
        self.map_levels = None
        self.canonical_scale = canonical_scale
        self.canonical_level = canonical_level

    def forward(self, x: Dict[str, Tensor], boxes: List[Tensor], image_shapes: List[Tuple[int, int]]) -> Tensor:
        features = _filter_input(x, self.featmap_names)
        scales, mapper = self.scales, self.map_levels
        if scales is None or mapper is None:
            scales, mapper = _setup_scales(features, image_shapes, self.canonical_scale, self.canonical_level)
            self.scales, self.map_levels = scales, mapper
        output_hw = [self.output_size[0], self.output_size[1]]
        return _multiscale_roi_align(features, boxes, output_hw, self.sampling_ratio, scales, mapper)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(featmap_names={self.featmap_names}, "
            f"output_size={self.output_size}, sampling_ratio={self.sampling_ratio})"
        )
