"""The mmcv.ops bridge: mmcv-lite's ``mmcv.ops`` running on mmops.

Enable it before mmcv.ops (or mmdet) is first imported::

    import mmops.mmcv_ops  # installs the bridge (idempotent); same as mmops.mmcv_ops.install()

or run a script with it: ``python -m mmops.mmcv_ops tools/train.py cfg.py``.
A ``sys.meta_path`` finder then (1) provides ``mmcv._ext`` when no compiled one
exists, so mmcv-lite's own ``mmcv/ops/*.py`` import unchanged (every name,
every MODELS registration), and (2) once ``mmcv.ops`` has executed, routes the
autograd Functions of the ops mmops has to mmops (see docs/mmcv_bridge.md).
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
from typing import Any, Dict, List, Optional, Tuple

from . import _ext, _routes, _sync_bn

__all__: List[str] = []  # nothing re-exported as mmops.<name>

# (mmcv module, Function class, replacement of its apply)
_FUNCTION_ROUTES: List[Tuple[str, str, Any]] = [
    ("mmcv.ops.roi_align", "RoIAlignFunction", _routes.roi_align),
    ("mmcv.ops.roi_pool", "RoIPoolFunction", _routes.roi_pool),
    ("mmcv.ops.deform_conv", "DeformConv2dFunction", _routes.deform_conv2d),
    ("mmcv.ops.modulated_deform_conv", "ModulatedDeformConv2dFunction", _routes.modulated_deform_conv2d),
    ("mmcv.ops.multi_scale_deform_attn", "MultiScaleDeformableAttnFunction", _routes.ms_deform_attn),
    ("mmcv.ops.focal_loss", "SigmoidFocalLossFunction", _routes.sigmoid_focal_loss),
    ("mmcv.ops.focal_loss", "SoftmaxFocalLossFunction", _routes.softmax_focal_loss),
    ("mmcv.ops.carafe", "CARAFEFunction", _routes.carafe),
    ("mmcv.ops.carafe", "CARAFENaiveFunction", _routes.carafe_naive),
    ("mmcv.ops.masked_conv", "MaskedConv2dFunction", _routes.masked_conv2d),
    ("mmcv.ops.deform_roi_pool", "DeformRoIPoolFunction", _routes.deform_roi_pool),
    ("mmcv.ops.sync_bn", "SyncBatchNormFunction", _sync_bn.SyncBatchNormFunction.apply),
    # --- roi_align_rotated / riroi_align_rotated ---
    ("mmcv.ops.roi_align_rotated", "RoIAlignRotatedFunction", _routes.roi_align_rotated),
    ("mmcv.ops.riroi_align_rotated", "RiRoIAlignRotatedFunction", _routes.riroi_align_rotated),
    # --- rotated_feature_align, active_rotated_filter ---
    ("mmcv.ops.rotated_feature_align", "RotatedFeatureAlignFunction", _routes.rotated_feature_align),
    ("mmcv.ops.active_rotated_filter", "ActiveRotatedFilterFunction", _routes.active_rotated_filter),
    # --- voxelization / dynamic_scatter ---
    ("mmcv.ops.voxelize", "_Voxelization", _routes.voxelization),
    ("mmcv.ops.scatter_points", "_DynamicScatter", _routes.dynamic_scatter),
    # --- assign_score_withk, chamfer_distance ---
    ("mmcv.ops.assign_score_withk", "AssignScoreWithK", _routes.assign_score_withk),
    ("mmcv.ops.chamfer_distance", "ChamferDistanceFunction", _routes.chamfer_distance),
    # --- ball_query / knn / three_nn / three_interpolate ---
    ("mmcv.ops.ball_query", "BallQuery", _routes.ball_query),
    ("mmcv.ops.knn", "KNN", _routes.knn),
    ("mmcv.ops.three_nn", "ThreeNN", _routes.three_nn),
    ("mmcv.ops.three_interpolate", "ThreeInterpolate", _routes.three_interpolate),
    # --- furthest_point_sample, gather_points, group_points ---
    ("mmcv.ops.furthest_point_sample", "FurthestPointSampling", _routes.furthest_point_sample),
    ("mmcv.ops.furthest_point_sample", "FurthestPointSamplingWithDist", _routes.furthest_point_sample_with_dist),
    ("mmcv.ops.gather_points", "GatherPoints", _routes.gather_points),
    ("mmcv.ops.group_points", "GroupingOperation", _routes.grouping_operation),
    # --- roiaware_pool3d, roipoint_pool3d ---
    ("mmcv.ops.roiaware_pool3d", "RoIAwarePool3dFunction", _routes.roiaware_pool3d),
    ("mmcv.ops.roipoint_pool3d", "RoIPointPool3dFunction", _routes.roipoint_pool3d),
    # --- psa_mask ---
    ("mmcv.ops.psa_mask", "PSAMaskFunction", _routes.psa_mask),  # --- border_align ---
    ("mmcv.ops.border_align", "BorderAlignFunction", _routes.border_align),
    # --- bezier_align ---
    ("mmcv.ops.bezier_align", "BezierAlignFunction", _routes.bezier_align),
    # --- prroi_pool ---
    ("mmcv.ops.prroi_pool", "PrRoIPoolFunction", _routes.prroi_pool),
    # --- tin_shift ---
    ("mmcv.ops.tin_shift", "TINShiftFunction", _routes.tin_shift),
    # --- correlation ---
    ("mmcv.ops.correlation", "CorrelationFunction", _routes.correlation),
    # --- fused_bias_leakyrelu ---
    ("mmcv.ops.fused_bias_leakyrelu", "FusedBiasLeakyReLUFunction", _routes.fused_bias_leakyrelu),
]
# (mmcv module, class, method, replacement)
_METHOD_ROUTES: List[Tuple[str, str, str, Any]] = [
    ("mmcv.ops.multi_scale_deform_attn", "MultiScaleDeformableAttention", "forward", _routes.msda_forward),
    # --- cc_attention ---
    ("mmcv.ops.cc_attention", "CrissCrossAttention", "forward", _routes.cc_attention_forward),
    # --- corner_pool ---
    ("mmcv.ops.corner_pool", "CornerPool", "forward", _routes.corner_pool_forward),
]
# (mmcv module, module-level function, replacement): the function is replaced
# wherever an mmcv module bound it (e.g. mmcv.ops re-exports it)
_MODULE_FUNCTION_ROUTES: List[Tuple[str, str, Any]] = [
    # --- diff_iou_rotated ---
    ("mmcv.ops.diff_iou_rotated", "diff_iou_rotated_2d", _routes.diff_iou_rotated_2d),
    ("mmcv.ops.diff_iou_rotated", "diff_iou_rotated_3d", _routes.diff_iou_rotated_3d),
    # --- iou3d ---
    ("mmcv.ops.iou3d", "boxes_overlap_bev", _routes.boxes_overlap_bev),
    ("mmcv.ops.iou3d", "boxes_iou_bev", _routes.boxes_iou_bev),
    ("mmcv.ops.iou3d", "nms_bev", _routes.nms_bev),
    ("mmcv.ops.iou3d", "nms_normal_bev", _routes.nms_normal_bev),
    # --- points_in_boxes (mmcv's part / all need the current CUDA device; these run anywhere) ---
    ("mmcv.ops.points_in_boxes", "points_in_boxes_part", _routes.points_in_boxes_part),
    ("mmcv.ops.points_in_boxes", "points_in_boxes_all", _routes.points_in_boxes_all),
    ("mmcv.ops.points_in_boxes", "points_in_boxes_cpu", _routes.points_in_boxes_cpu),
    # --- upfirdn2d (filter2d / upsample2d / downsample2d call it) ---
    ("mmcv.ops.upfirdn2d", "upfirdn2d", _routes.upfirdn2d),
    # --- fused_bias_leakyrelu (mmcv's runs its composite off CUDA; FusedBiasLeakyReLU calls it) ---
    ("mmcv.ops.fused_bias_leakyrelu", "fused_bias_leakyrelu", _routes.fused_bias_leakyrelu),
    # --- bias_act (mmcv's runs its composite off CUDA, its per-call Functions on CUDA) ---
    ("mmcv.ops.bias_act", "bias_act", _routes.bias_act),
    # --- filtered_lrelu (mmcv's runs its composite off CUDA, a per-call Function on CUDA) ---
    ("mmcv.ops.filtered_lrelu", "filtered_lrelu", _routes.filtered_lrelu),
]

_MISSING = object()
_undo: List[Tuple[Any, str, Any]] = []  # (owner, attribute, original) to restore


def _set(owner: Any, name: str, value: Any) -> None:
    original = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name, _MISSING)
    _undo.append((owner, name, original))
    setattr(owner, name, value)


def _is_apply_of(value: Any, classes: Dict[type, Any]) -> bool:
    # Function.apply is a C classmethod in recent torch: match by owner and name
    owner = getattr(value, "__self__", None)
    return isinstance(owner, type) and owner in classes and getattr(value, "__name__", "") == "apply"


def _route(ops_module: Any) -> None:
    """Routes mmcv's Functions (and the module-level aliases of their apply,
    e.g. ``roi_align = RoIAlignFunction.apply``, wherever mmcv bound them)."""
    if getattr(ops_module, "__mmops_routed__", False):
        return
    classes: Dict[type, Any] = {}
    for module_name, class_name, replacement in _FUNCTION_ROUTES:
        cls = getattr(importlib.import_module(module_name), class_name)
        classes[cls] = replacement
    aliases = []
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "mmcv" or name.startswith("mmcv.")):
            continue
        for attr, value in list(vars(module).items()):
            if _is_apply_of(value, classes):
                aliases.append((module, attr, classes[value.__self__]))
    for cls, replacement in classes.items():
        _set(cls, "apply", staticmethod(replacement))
    for module, attr, replacement in aliases:
        _set(module, attr, replacement)
    for module_name, class_name, method, replacement in _METHOD_ROUTES:
        _set(getattr(importlib.import_module(module_name), class_name), method, replacement)
    originals = [(getattr(importlib.import_module(m), f), r) for m, f, r in _MODULE_FUNCTION_ROUTES]
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "mmcv" or name.startswith("mmcv.")):
            continue
        for attr, value in list(vars(module).items()):
            for original, replacement in originals:
                if value is original:
                    _set(module, attr, replacement)
    _set(ops_module, "__mmops_routed__", True)


class _ExtLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return _ext.make_module(spec.name)

    def exec_module(self, module: Any) -> None:
        pass


class _RoutingLoader(importlib.abc.Loader):
    """mmcv.ops's own loader, then the routing."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        _route(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Optional[Any], target: Any = None) -> Any:
        if fullname not in ("mmcv._ext", "mmcv.ops"):
            return None
        real = importlib.machinery.PathFinder.find_spec(fullname, path)
        if fullname == "mmcv._ext":
            if real is not None:  # a compiled mmcv-full: keep its kernels for the ops mmops lacks
                return None
            return importlib.machinery.ModuleSpec(fullname, _ExtLoader())
        if real is None or real.loader is None:
            return None
        real.loader = _RoutingLoader(real.loader)
        return real


_finder = _Finder()


def install() -> None:
    """Enables the bridge (idempotent). If mmcv.ops is already imported, its
    Functions are routed now; modules that bound mmcv's functions by name
    before this call keep the old ones, so call it before importing mmdet."""
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    if "mmcv.ops" in sys.modules:
        _route(sys.modules["mmcv.ops"])


def uninstall() -> None:
    """Removes the finder and restores every routed attribute (a stand-in
    mmcv._ext already imported stays in sys.modules)."""
    while _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    while _undo:
        owner, name, original = _undo.pop()
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


def is_installed() -> bool:
    return _finder in sys.meta_path


def routed_ops() -> List[str]:
    """The mmcv Functions and methods the bridge sends to mmops."""
    return (
        [f"{m}.{c}" for m, c, _ in _FUNCTION_ROUTES]
        + [f"{m}.{c}.{f}" for m, c, f, _ in _METHOD_ROUTES]
        + [f"{m}.{f}" for m, f, _ in _MODULE_FUNCTION_ROUTES]
    )


install()
