"""The stand-in for mmcv-full's compiled ``mmcv._ext``.

mmcv-lite's ``mmcv/ops/*.py`` call ``ext_loader.load_ext("_ext", names)`` at
import, which only checks that each name exists. Every name exists here:
the few kernels that mmcv's Python calls directly (NMS, soft-NMS, nms_match,
box overlaps, version queries) run on mmops; every other one raises
NotImplementedError naming the mmcv op when called, never at import.
"""

import importlib
import types
from typing import Any, Callable, Dict

import torch

_SUFFIXES = ("_forward", "_backward", "_backward_input", "_backward_parameters", "_backward_param")


def op_name(ext_name: str) -> str:
    """The mmcv op an ext kernel belongs to (roi_align_forward -> roi_align)."""
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if ext_name.endswith(suffix):
            return ext_name[: -len(suffix)]
    return ext_name


def unserved(ext_name: str) -> Callable[..., Any]:
    """A kernel mmops does not provide: calling it names the mmcv op."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"mmcv.ops: op '{op_name(ext_name)}' (mmcv._ext.{ext_name}) is not implemented by mmops; "
            "the mmops bridge serves the ops listed in docs/mmcv_bridge.md"
        )

    kernel.__name__ = ext_name
    kernel.__qualname__ = ext_name
    return kernel


def mmops_attr(name: str, mmcv_op: str) -> Any:
    """mmops.<name>, resolved at call time (ops being added to mmops are
    wired by name); NotImplementedError naming the mmcv op when absent."""
    mmops = importlib.import_module("mmops")
    value = getattr(mmops, name, None)
    if value is None:
        raise NotImplementedError(f"mmcv.ops: op '{mmcv_op}' is not implemented by mmops (no mmops.{name})")
    return value


def _shift_for_offset(boxes: torch.Tensor, offset: int) -> torch.Tensor:
    from mmops.nms import _shift_for_offset as shift

    return shift(boxes, int(offset))


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float, offset: int = 0) -> torch.Tensor:
    return torch.ops.mmops.nms(_shift_for_offset(boxes, offset), scores, float(iou_threshold))


_SOFT_NMS_METHODS = {0: "naive", 1: "linear", 2: "gaussian"}


def softnms(
    boxes: torch.Tensor,
    scores: torch.Tensor,
    dets: torch.Tensor,
    iou_threshold: float,
    sigma: float,
    min_score: float,
    method: int,
    offset: int,
) -> torch.Tensor:
    """mmcv's kernel contract: fills dets[:K] (boxes, decayed score), returns the K indices."""
    from mmops.nms import soft_nms

    if int(method) not in _SOFT_NMS_METHODS:
        raise ValueError(f"mmcv.ops.soft_nms: method must be 0, 1 or 2, got {method}")
    kept, inds = soft_nms(
        boxes, scores, float(iou_threshold), float(sigma), float(min_score), _SOFT_NMS_METHODS[int(method)], int(offset)
    )
    dets[: kept.size(0)].copy_(kept)
    return inds


def nms_match(dets: torch.Tensor, iou_threshold: float) -> list:
    """mmcv's kernel returns one list of ints per group; mmops.nms_match's groups
    (tensors, arrays or lists) are turned into that."""
    groups = mmops_attr("nms_match", "nms_match")(dets, float(iou_threshold))
    return [g.tolist() if hasattr(g, "tolist") else list(g) for g in groups]


def bbox_overlaps(
    bboxes1: torch.Tensor,
    bboxes2: torch.Tensor,
    ious: torch.Tensor,
    mode: int = 0,
    aligned: bool = False,
    offset: int = 0,
) -> None:
    """mmcv's kernel contract: fills ious (mode 0 = iou, 1 = iof)."""
    modes = {0: "iou", 1: "iof"}
    if int(mode) not in modes:
        raise ValueError(f"mmcv.ops.bbox_overlaps: mode must be 0 (iou) or 1 (iof), got {mode}")
    ious.copy_(torch.ops.mmops.bbox_overlaps(bboxes1, bboxes2, modes[int(mode)], bool(aligned), int(offset)))


def get_compiler_version() -> str:
    return "mmops (libmmops.so)"


def get_compiling_cuda_version() -> str:
    return str(torch.version.cuda) if torch.version.cuda else "not available"


SERVED: Dict[str, Callable[..., Any]] = {
    "nms": nms,
    "softnms": softnms,
    "nms_match": nms_match,
    "bbox_overlaps": bbox_overlaps,
    "get_compiler_version": get_compiler_version,
    "get_compiling_cuda_version": get_compiling_cuda_version,
}


def make_module(name: str = "mmcv._ext") -> types.ModuleType:
    """The module object: SERVED kernels, and a stub for any other public name."""
    module = types.ModuleType(name, __doc__)
    module.__dict__.update(SERVED)
    module.__mmops_bridge__ = True

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        stub = unserved(attr)
        setattr(module, attr, stub)
        return stub

    module.__getattr__ = __getattr__
    return module


# --- poly (min_area_polygons, convex_iou, convex_giou, points_in_polygons) ---


def min_area_polygons(pointsets: torch.Tensor, polygons: torch.Tensor) -> None:
    """mmcv's kernel contract: fills polygons [N, 8]."""
    polygons.copy_(torch.ops.mmops.min_area_polygons(pointsets))


def convex_iou(pointsets: torch.Tensor, polygons: torch.Tensor, ious: torch.Tensor) -> None:
    """mmcv's kernel contract: fills ious [N, K]."""
    ious.copy_(torch.ops.mmops.convex_iou(pointsets, polygons))


def convex_giou(pointsets: torch.Tensor, polygons: torch.Tensor, output: torch.Tensor) -> None:
    """mmcv's kernel contract: fills output [N, 19] with the gradient (18) then giou."""
    giou, grad = torch.ops.mmops.convex_giou(pointsets, polygons)
    output[:, :18].copy_(grad)
    output[:, 18].copy_(giou)


def points_in_polygons_forward(points: torch.Tensor, polygons: torch.Tensor, output: torch.Tensor) -> None:
    """mmcv's kernel contract: fills output [N, M] (float32 in mmcv's Python)."""
    output.copy_(torch.ops.mmops.points_in_polygons(points, polygons))


SERVED.update(
    {
        "min_area_polygons": min_area_polygons,
        "convex_iou": convex_iou,
        "convex_giou": convex_giou,
        "points_in_polygons_forward": points_in_polygons_forward,
    }
)
