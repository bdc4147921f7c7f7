"""Property-based tests of every op of the op table, on inputs made from the conformance
cases (conformance.all_cases()):

  - extreme and invalid arguments (ints 0, -1, 2**31, 2**32 + 1, 2**62, 2**63 - 1, -2**63;
    NaN / Inf / huge floats; empty, longer and mutated int lists; unknown strings; tensors
    empty, NaN, Inf, of another dtype, with a dim more or less): every call returns or
    raises a RuntimeError / ValueError / TypeError, never crashes and never hangs (each call
    runs in a worker process under a timeout), and an error names the argument changed;
  - valid inputs (hypothesis draws the size, the values' seed and scale): the op in float64
    matches the float64 reference of the op's test file, and non-contiguous inputs give
    exactly the contiguous result;
  - CUDA == CPU on the same drawn inputs (marked cuda).

hypothesis runs derandomized (a fixed seed): CI sees the same examples every run.
"""

import math
import multiprocessing
import os

import _op_worker
import pytest
import torch
from conformance import all_cases, flat_tensors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import Tensor

CALL_TIMEOUT_S = float(os.environ.get("MMOPS_PROPERTY_TIMEOUT", "30"))
MEMORY_LIMIT = 8 << 30
SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=int(os.environ.get("MMOPS_PROPERTY_EXAMPLES", "12")),
    suppress_health_check=list(HealthCheck),
)

EXTREME_INTS = [0, -1, 2**31, 2**32 + 1, 2**62, 2**63 - 1, -(2**63)]
EXTREME_FLOATS = [math.nan, math.inf, -math.inf, 1e308, -1e308]
BAD_STRINGS = ["", "bogus"]
ERROR_TYPES = ("RuntimeError", "ValueError", "TypeError")


def _first_case_per_op():
    cases = {}
    for case in all_cases():
        cases.setdefault(case.qualified_name, case)
    return cases


CASES = _first_case_per_op()
OPS = sorted(CASES)


# --------------------------------------------------------------------------- the worker


class Worker:
    """A spawned process that runs op calls; restarted after a crash or a hang."""

    def __init__(self):
        self.process = None

    def start(self):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_op_worker.serve, args=(child, MEMORY_LIMIT), daemon=True)
        self.process.start()
        assert self.conn.poll(120) and self.conn.recv() == "ready", "the worker did not start"

    def call(self, op_name, args):
        """("ok", shapes) / ("error", type, message) / ("crash", exitcode) / ("hang", seconds)."""
        if self.process is None or not self.process.is_alive():
            self.start()
        self.conn.send((op_name, args))
        if not self.conn.poll(CALL_TIMEOUT_S):
            self.process.kill()
            self.process.join()
            self.process = None
            return ("hang", CALL_TIMEOUT_S)
        try:
            return self.conn.recv()
        except EOFError:
            self.process.join()
            code, self.process = self.process.exitcode, None
            return ("crash", code)

    def stop(self):
        if self.process is not None and self.process.is_alive():
            self.conn.send(None)
            self.process.join(10)


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.stop()


# --------------------------------------------------------------------------- mutations


def _schema_args(case):
    return case.op.default._schema.arguments


def _mutations(case):
    """(id, position, argument name, make(args) -> args) for every argument of the case's sample."""
    args = case.sample("cpu", case.dtype, 0).args
    out = []

    def put(position, value):
        return lambda a: a[:position] + (value,) + a[position + 1 :]

    def tensor_change(position, fn):
        return lambda a: a[:position] + (fn(a[position]),) + a[position + 1 :]

    for p, (arg, value) in enumerate(zip(_schema_args(case), args)):
        name = arg.name
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            out += [(f"{name}={v}", p, name, put(p, v)) for v in EXTREME_INTS]
        elif isinstance(value, float):
            out += [(f"{name}={v}", p, name, put(p, v)) for v in EXTREME_FLOATS]
        elif isinstance(value, str):
            out += [(f"{name}={v!r}", p, name, put(p, v)) for v in BAD_STRINGS]
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], (int, float)):
            extremes = EXTREME_INTS if isinstance(value[0], int) else EXTREME_FLOATS
            out += [(f"{name}[0]={v}", p, name, put(p, [v] + list(value[1:]))) for v in extremes]
            out += [(f"{name}=[]", p, name, put(p, [])), (f"{name}=longer", p, name, put(p, list(value) * 3))]
        elif isinstance(value, Tensor):
            floating = value.is_floating_point()
            changes = {
                "empty": lambda t: t[:0],
                "extra_dim": lambda t: t.unsqueeze(0),
                "fewer_dims": lambda t: t.flatten() if t.dim() > 1 else t[0] if t.numel() else t.reshape(()),
                "dtype": (lambda t: t.to(torch.int32)) if floating else (lambda t: t.to(torch.float16)),
            }
            if floating:
                changes.update(nan=lambda t: torch.full_like(t, math.nan), inf=lambda t: torch.full_like(t, math.inf))
            elif value.dtype != torch.bool:  # a bool mask has no "huge" value
                changes.update(huge=lambda t: torch.full_like(t, torch.iinfo(t.dtype).max))
            out += [(f"{name}:{k}", p, name, tensor_change(p, fn)) for k, fn in changes.items()]
    return out


# Calls that fail today, each naming the defect it shows: "<op>-<mutation id>" -> defect.
# strict=True makes the run fail as soon as the call behaves, so a fix drops its mark.
KNOWN: dict[str, str] = {}


def _mutation_params():
    params = []
    for op in OPS:
        for mid, position, name, make in _mutations(CASES[op]):
            pid = f"{op[7:]}-{mid}"
            marks = [pytest.mark.xfail(strict=True, reason=KNOWN[pid])] if pid in KNOWN else []
            params.append(pytest.param(op, position, name, make, id=pid, marks=marks))
    return params


# arguments whose errors may name another argument, the one whose expected shape they change
_CONV_SHAPE = ("offset", "mask", "bias", "output")
RELATED = {
    "level_start_index": ("spatial_shapes",),
    "stride": _CONV_SHAPE,
    "padding": _CONV_SHAPE,
    "dilation": _CONV_SHAPE,
    "input": _CONV_SHAPE,
    "weight": _CONV_SHAPE,
    "features": ("rois",),  # an empty batch makes every roi's batch index out of range
}


@pytest.mark.parametrize("op,position,name,make", _mutation_params())
def test_extreme_and_invalid_arguments(worker, op, position, name, make):
    """The op returns or raises an error naming the changed argument; no crash, no hang."""
    case = CASES[op]
    args = make(tuple(case.sample("cpu", case.dtype, 0).args))
    result = worker.call(op.split("::")[1], args)
    assert result[0] in ("ok", "error"), f"{op}: {result}"
    if result[0] == "error":
        kind, message = result[1], result[2]
        assert kind in ERROR_TYPES, f"{op}: {kind}: {message}"
        names = (name, name.rstrip("s").replace("_", " ")) + RELATED.get(name, ())
        assert any(n in message for n in names), f"{op}: the error does not name {name}: {message}"


# --------------------------------------------------------------------------- valid inputs


def _references():
    import diff_iou_rotated_reference  # --- diff_iou_rotated ---
    import test_bbox_overlaps as bo
    import test_deform_conv as dc
    import test_focal_loss as fl
    import test_masked_conv as mc
    import test_ms_deform_attn as ms
    import test_multi_level_roi_align as ml
    import test_nms as nm
    import test_nms_match as nmm
    import test_roi_pool as rp
    from bezier_align_reference import bezier_align_ref
    from border_align_reference import border_align_ref
    from carafe_reference import carafe_reference
    from cc_attention_reference import ca_map_ref, ca_weight_ref
    from corner_pool_reference import corner_pool_ref
    from correlation_reference import correlation_ref
    from deform_roi_pool_reference import deform_roi_pool_reference
    from prroi_pool_reference import prroi_pool_ref
    from ps_roi_reference import ps_roi_align_ref, ps_roi_pool_ref
    from psa_mask_reference import psa_mask_ref
    from roi_align_reference import roi_align_ref
    from text_grouping_reference import contour_expand_ref, pixel_group_ref
    from tin_shift_reference import tin_shift_ref

    def contour_expand(kernel_mask, internal_kernel_label, *rest):
        rows = contour_expand_ref(kernel_mask, internal_kernel_label, *rest)
        return torch.tensor(rows, dtype=torch.int32).reshape(internal_kernel_label.shape)

    def pixel_group(score, mask, embedding, kernel_label, *rest):
        # the reference rounds as the op does: float32 arithmetic below float64 inputs
        labels, means, counts = pixel_group_ref(
            score, mask, embedding, kernel_label, *rest, score.dtype != torch.float64
        )
        means = torch.tensor(means, dtype=torch.float64)
        return torch.tensor(labels, dtype=torch.int32).reshape(kernel_label.shape), means, torch.tensor(counts)

    return {
        "mmops::roi_align": roi_align_ref,
        "mmops::multi_level_roi_align": ml.multi_level_ref,
        "mmops::roi_pool": lambda x, rois, size, scale: rp.roi_pool_ref(x, rois, size, scale),
        "mmops::nms": nm.nms_ref,
        "mmops::batched_nms": lambda b, s, i, t: nm.nms_ref(b, s, t, i),
        "mmops::soft_nms": nm.soft_nms_ref,
        "mmops::nms_match": lambda dets, thr: nmm.rows_of(nmm.nms_match_ref(dets, thr)),
        "mmops::bbox_overlaps": bo.overlaps_ref,
        "mmops::sigmoid_focal_loss": fl.sigmoid_ref,
        "mmops::softmax_focal_loss": fl.softmax_ref,
        "mmops::deform_conv2d": lambda x, o, w, b, *rest: dc.reference(x, o, None, w, b, *rest),
        "mmops::modulated_deform_conv2d": dc.reference,
        "mmops::ms_deform_attn": lambda v, shapes, starts, loc, attn: ms.reference(v, shapes, loc, attn),
        "mmops::carafe": carafe_reference,
        "mmops::masked_conv2d": mc.reference,
        "mmops::deform_roi_pool": deform_roi_pool_reference,
        "mmops::psa_mask": psa_mask_ref,
        "mmops::ca_weight": ca_weight_ref,
        "mmops::ca_map": ca_map_ref,
        "mmops::border_align": border_align_ref,
        "mmops::corner_pool": corner_pool_ref,
        "mmops::prroi_pool": prroi_pool_ref,
        # --- bezier_align ---
        "mmops::bezier_align": bezier_align_ref,
        # --- ps_roi ---
        "mmops::ps_roi_align": ps_roi_align_ref,
        "mmops::ps_roi_pool": ps_roi_pool_ref,
        "mmops::tin_shift": tin_shift_ref,
        "mmops::correlation": correlation_ref,
        # --- contour_expand, pixel_group ---
        "mmops::contour_expand": contour_expand,
        "mmops::pixel_group": pixel_group,
        # --- diff_iou_rotated ---
        "mmops::diff_iou_rotated_2d": diff_iou_rotated_reference.composite_iou_2d,
        "mmops::diff_iou_rotated_3d": diff_iou_rotated_reference.composite_iou_3d,
        # --- box_iou_rotated / nms_rotated ---
        **_rotated_references(),
        **_rotated_feature_references(),
        **_voxelization_references(),
        # --- assign_score_withk, chamfer_distance ---
        **_point_cloud_references(),
        # --- neighbors / three_interpolate ---
        **_neighbor_references(),
        # --- furthest_point_sample, group_points ---
        **_point_sampling_references(),
        # --- iou3d ---
        **_iou3d_references(),
        # --- points_in_boxes, roiaware_pool3d, roipoint_pool3d ---
        **_box3d_references(),
        # --- upfirdn2d, fused_bias_leakyrelu, bias_act ---
        **_stylegan_references(),
    }


def _stylegan_references():  # --- upfirdn2d, fused_bias_leakyrelu, bias_act, filtered_lrelu ---
    from bias_act_reference import bias_act_ref
    from filtered_lrelu_reference import filtered_lrelu_ref
    from fused_bias_leakyrelu_reference import fused_bias_leakyrelu_ref
    from upfirdn2d_reference import upfirdn2d_ref

    return {
        "mmops::upfirdn2d": upfirdn2d_ref,
        "mmops::fused_bias_leakyrelu": fused_bias_leakyrelu_ref,
        "mmops::bias_act": bias_act_ref,
        "mmops::filtered_lrelu": filtered_lrelu_ref,
    }


def _neighbor_references():
    import neighbors_reference as nr

    return {
        "mmops::ball_query": nr.ball_query_ref,
        "mmops::stack_ball_query": nr.stack_ball_query_ref,
        "mmops::knn": nr.knn_ref,
        "mmops::three_nn": nr.three_nn_ref,
        "mmops::three_interpolate": nr.three_interpolate_ref,
    }


def _iou3d_references():  # --- iou3d ---
    import test_iou3d as i3
    import test_nms_rotated as nr
    from iou3d_reference import aligned_iou_ref, overlaps_ref

    return {
        "mmops::boxes_overlap_bev": lambda a, b: overlaps_ref(a, b, iou=False),
        "mmops::boxes_iou_bev": lambda a, b: overlaps_ref(a, b, iou=True),
        "mmops::nms_bev": i3.nms_bev_ref,
        "mmops::nms_normal_bev": lambda b, s, t: nr.nms_ref(b, s, t, iou=aligned_iou_ref(b).tolist()),
    }


def _box3d_references():  # --- points_in_boxes, roiaware_pool3d, roipoint_pool3d ---
    import box3d_reference as b3

    return {
        "mmops::points_in_boxes_part": b3.points_in_boxes_part_reference,
        "mmops::points_in_boxes_all": b3.points_in_boxes_all_reference,
        "mmops::roiaware_pool3d": b3.roiaware_pool3d_reference,
        "mmops::roipoint_pool3d": b3.roipoint_pool3d_reference,
    }


def _rotated_feature_references():
    import test_points_in_polygons as pip
    from active_rotated_filter_reference import active_rotated_filter_ref
    from polygon_reference import pointset_giou, pointset_iou
    from roi_align_rotated_reference import riroi_align_rotated_ref, roi_align_rotated_ref
    from rotated_feature_align_reference import rotated_feature_align_ref

    def pairwise(fn, a, b, aligned=False):
        rows = [
            [fn(a[i].tolist(), b[i if aligned else j].tolist()) for j in range(1 if aligned else len(b))]
            for i in range(len(a))
        ]
        out = torch.tensor(rows, dtype=torch.float64).reshape(len(a), -1)
        return out[:, 0] if aligned else out

    return {
        "mmops::roi_align_rotated": roi_align_rotated_ref,
        "mmops::riroi_align_rotated": riroi_align_rotated_ref,
        "mmops::rotated_feature_align": rotated_feature_align_ref,
        "mmops::active_rotated_filter": active_rotated_filter_ref,
        "mmops::convex_iou": lambda sets, quads: pairwise(pointset_iou, sets, quads),
        "mmops::convex_giou": lambda sets, quads: pairwise(pointset_giou, sets, quads, aligned=True),
        "mmops::points_in_polygons": lambda pts, quads: pairwise(
            lambda p, q: float(pip.exact_side(p, q) > 0), pts, quads
        ),
    }


def _voxelization_references():  # --- voxelization ---
    import voxelization_reference as vr

    return {
        "mmops::hard_voxelize": vr.hard_voxelize_ref,
        "mmops::dynamic_voxelize": vr.dynamic_voxelize_ref,
        "mmops::dynamic_scatter": vr.dynamic_scatter_ref,
    }


# --- furthest_point_sample, group_points ---
def _point_sampling_references():
    import test_group_points as gp
    from furthest_point_sample_reference import fps_dist_reference, fps_xyz_reference

    return {
        "mmops::furthest_point_sample": fps_xyz_reference,
        "mmops::furthest_point_sample_with_dist": fps_dist_reference,
        "mmops::gather_points": lambda f, idx: gp.gather_ref(f, idx)[0],
        "mmops::group_points": lambda f, idx: gp.gather_ref(f, idx)[0],
        "mmops::stack_group_points": lambda f, fc, idx, ic: gp.stack_ref(f, fc, idx, ic)[0],
    }


def _rotated_references():
    import test_box_iou_rotated as bir
    import test_nms_rotated as nr

    return {
        "mmops::box_iou_rotated": bir.rotated_ref,
        "mmops::box_iou_quadri": bir.quadri_ref,
        "mmops::nms_rotated": nr.nms_ref,
        "mmops::nms_quadri": lambda b, s, t, labels: nr.nms_ref(b, s, t, labels),
    }


# --- assign_score_withk, chamfer_distance ---
def _point_cloud_references():
    from assign_score_withk_reference import assign_score_withk_ref
    from chamfer_distance_reference import chamfer_distance_ref

    return {
        "mmops::assign_score_withk": lambda s, p, c, knn, aggregate: assign_score_withk_ref(s, p, c, knn),
        "mmops::chamfer_distance": chamfer_distance_ref,
    }


REFERENCES = _references()
# outputs the float64 reference defines (soft_nms: dets and keep)
N_OUTPUTS = {"mmops::soft_nms": 2}
N_OUTPUTS.update({"mmops::hard_voxelize": 3, "mmops::dynamic_scatter": 2})  # --- voxelization ---
N_OUTPUTS["mmops::chamfer_distance"] = 4  # distances and indices (--- chamfer_distance ---)
N_OUTPUTS["mmops::three_nn"] = 2  # --- neighbors: dist and idx ---
N_OUTPUTS["mmops::pixel_group"] = 3  # labels, mean scores, counts (--- pixel_group ---)


def _drawn_sample(op, size, seed, scale):
    """The case's float64 sample (size 0 or 1), every floating tensor that is not a box set
    perturbed by noise of the drawn seed, times the drawn scale."""
    case = CASES[op]
    args = list(case.sample("cpu", torch.float64, size).args)
    g = torch.Generator().manual_seed(seed)
    for p in case.grad_args:
        is_box_set = op in ("mmops::bbox_overlaps",) or case.arg_name(p) == "rois"  # batch indices stay valid
        if isinstance(args[p], Tensor) and args[p].is_floating_point() and not is_box_set:
            args[p] = (args[p] + 0.1 * torch.randn(args[p].shape, generator=g, dtype=torch.float64)) * scale
    return tuple(args)


def _close(actual, expected, what, rtol=1e-9, atol=1e-9):
    assert actual.shape == expected.shape, f"{what}: {tuple(actual.shape)} != {tuple(expected.shape)}"
    if expected.is_floating_point():
        torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True, msg=what)
    else:
        assert torch.equal(actual, expected.to(actual.dtype)), what


valid_inputs = st.tuples(st.integers(0, 1), st.integers(0, 2**31 - 1), st.sampled_from([0.5, 1.0, 3.0]))


# ops whose result has no elementwise float64 reference, and where their own tests check it
NO_ELEMENTWISE_REFERENCE = {
    # which of two equal-area rectangles wins (and so the corner order) is decided by
    # rounding; test_min_area_polygons.py checks areas against a brute-force exact search
    "mmops::min_area_polygons": "equal-area rectangles tie",
}


@pytest.mark.parametrize("op", OPS)
@SETTINGS
@given(drawn=valid_inputs)
def test_valid_inputs_match_float64_reference(op, drawn):
    if op in NO_ELEMENTWISE_REFERENCE:
        pytest.skip(NO_ELEMENTWISE_REFERENCE[op])
    args = _drawn_sample(op, *drawn)
    n = N_OUTPUTS.get(op, 1)
    got = flat_tensors([CASES[op].op(*args)])[:n]
    expected = flat_tensors([REFERENCES[op](*args)])[:n]
    for i, (g, e) in enumerate(zip(got, expected)):
        _close(g, e, f"{op} output {i}, drawn {drawn}")


def _strided(t):
    """The same values in a non-contiguous tensor (every other element of a wider one)."""
    if t.dim() == 0 or t.numel() == 0:
        return t
    wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    wide[..., ::2] = t
    return wide[..., ::2]


@pytest.mark.parametrize("op", OPS)
@SETTINGS
@given(drawn=valid_inputs)
def test_noncontiguous_inputs_give_the_contiguous_result(op, drawn):
    args = _drawn_sample(op, *drawn)
    strided = tuple(
        _strided(a)
        if isinstance(a, Tensor)
        else [_strided(t) for t in a]
        if isinstance(a, list) and a and isinstance(a[0], Tensor)
        else a
        for a in args
    )
    for i, (g, e) in enumerate(zip(flat_tensors([CASES[op].op(*strided)]), flat_tensors([CASES[op].op(*args)]))):
        assert g.shape == e.shape and torch.equal(g, e), f"{op} output {i}, drawn {drawn}"


@pytest.mark.cuda
@pytest.mark.parametrize("op", OPS)
@SETTINGS
@given(drawn=valid_inputs)
def test_cuda_matches_cpu_on_drawn_inputs(op, drawn):
    args = _drawn_sample(op, *drawn)
    cuda_args = tuple(
        a.cuda()
        if isinstance(a, Tensor)
        else [t.cuda() for t in a]
        if isinstance(a, list) and a and isinstance(a[0], Tensor)
        else a
        for a in args
    )
    for i, (g, e) in enumerate(zip(flat_tensors([CASES[op].op(*cuda_args)]), flat_tensors([CASES[op].op(*args)]))):
        _close(g.cpu(), e, f"{op} output {i}, drawn {drawn}", rtol=1e-7, atol=1e-7)
