"""The mmcv.ops bridge (python/mmops/mmcv_ops): mmcv-lite's mmcv.ops on mmops.

Every mmcv entry point the bridge serves is checked against mmops's own op
(same values, same gradients) and against mmcv's conventions (numpy in and
out, deprecated aliases, argument order, MODELS names); unserved kernels
raise NotImplementedError naming the op. Skips without mmcv-lite / mmengine.
"""

import ast
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import mmops
import mmops.mmcv_ops

pytest.importorskip("mmengine", reason="mmengine is not installed (.ci/bootstrap.sh _mmops_install_test_extras)")
mmcv = pytest.importorskip("mmcv", reason="mmcv-lite is not installed (.ci/bootstrap.sh _mmops_install_test_extras)")
ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
np = pytest.importorskip("numpy")

from mmengine.registry import MODELS  # noqa: E402

# mmcv 2.1's mmcv.ops.__all__ (without the MLU-only names)
MMCV_21_ALL = """
bbox_overlaps CARAFE CARAFENaive CARAFEPack carafe carafe_naive CornerPool DeformConv2d DeformConv2dPack
deform_conv2d DeformRoIPool DeformRoIPoolPack ModulatedDeformRoIPoolPack deform_roi_pool SigmoidFocalLoss
SoftmaxFocalLoss sigmoid_focal_loss softmax_focal_loss get_compiler_version get_compiling_cuda_version
MaskedConv2d masked_conv2d ModulatedDeformConv2d ModulatedDeformConv2dPack modulated_deform_conv2d
batched_nms nms soft_nms nms_match RoIAlign roi_align RoIPool roi_pool SyncBatchNorm Conv2d ConvTranspose2d
Linear MaxPool2d CrissCrossAttention PSAMask point_sample rel_roi_point_to_rel_img_point SimpleRoIAlign
SAConv2d TINShift tin_shift assign_score_withk box_iou_rotated box_iou_quadri RoIPointPool3d nms_rotated
knn ball_query upfirdn2d FusedBiasLeakyReLU fused_bias_leakyrelu rotated_feature_align RiRoIAlignRotated
riroi_align_rotated RoIAlignRotated roi_align_rotated pixel_group QueryAndGroup GroupAll grouping_operation
contour_expand three_nn three_interpolate MultiScaleDeformableAttention BorderAlign border_align
gather_points furthest_point_sample nms_quadri furthest_point_sample_with_dist PointsSampler Correlation
boxes_iou3d boxes_iou_bev boxes_overlap_bev nms_bev nms_normal_bev nms3d nms3d_normal Voxelization
voxelization dynamic_scatter DynamicScatter RoIAwarePool3d SparseConv2d SparseConv3d SparseConvTranspose2d
SparseConvTranspose3d SparseInverseConv2d SparseInverseConv3d SubMConv2d SubMConv3d SparseModule
SparseSequential SparseMaxPool2d SparseMaxPool3d SparseConvTensor scatter_nd points_in_boxes_part
points_in_boxes_cpu points_in_boxes_all points_in_polygons min_area_polygons active_rotated_filter
convex_iou convex_giou diff_iou_rotated_2d diff_iou_rotated_3d chamfer_distance PrRoIPool prroi_pool
bias_act filtered_lrelu conv2d conv_transpose2d filter2d upsample2d BezierAlign bezier_align
""".split()


def _lite_all():
    """The __all__ list literal of mmcv-lite's mmcv/ops/__init__.py."""
    with open(os.path.join(os.path.dirname(ops.__file__), "__init__.py")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("no __all__ in mmcv/ops/__init__.py")


def test_all_names_exist():
    assert sorted(_lite_all()) == sorted(MMCV_21_ALL)
    missing = [name for name in MMCV_21_ALL if not hasattr(ops, name)]
    assert missing == []
    assert sorted(ops.__all__) == sorted(MMCV_21_ALL)


def test_submodule_imports_and_pure_pytorch_code():
    from mmcv.ops.merge_cells import SumCell
    from mmcv.ops.multi_scale_deform_attn import (
        MultiScaleDeformableAttention,
        MultiScaleDeformableAttnFunction,
        multi_scale_deformable_attn_pytorch,
    )
    from mmcv.ops.point_sample import point_sample
    from mmcv.ops.saconv import SAConv2d

    assert MultiScaleDeformableAttention is ops.MultiScaleDeformableAttention
    assert callable(MultiScaleDeformableAttnFunction.apply) and callable(multi_scale_deformable_attn_pytorch)
    assert SAConv2d is ops.SAConv2d and SumCell is not None
    x = torch.arange(16.0).view(1, 1, 4, 4)
    # the centre of pixel (1, 2) in normalised (x, y) = ((2 + 0.5) / 4, (1 + 0.5) / 4)
    out = point_sample(x, torch.tensor([[[2.5 / 4, 1.5 / 4]]]), align_corners=False)
    assert out.item() == pytest.approx(6.0)


def test_bridge_is_opt_in_and_installed():
    assert mmops.mmcv_ops.is_installed()
    assert "mmcv_ops" not in mmops.__all__
    assert "mmcv.ops.roi_align.RoIAlignFunction" in mmops.mmcv_ops.routed_ops()
    assert "mmops" in ops.get_compiler_version()
    assert isinstance(ops.get_compiling_cuda_version(), str)


def _grads(fn, *tensors):
    tensors = [t.detach().clone().requires_grad_(True) for t in tensors]
    out = fn(*tensors)
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
    return out.detach(), [t.grad for t in tensors]


def _assert_same(fn_a, fn_b, *tensors):
    out_a, grads_a = _grads(fn_a, *tensors)
    out_b, grads_b = _grads(fn_b, *tensors)
    torch.testing.assert_close(out_a, out_b, rtol=0, atol=0)
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


# --- RoIAlign / RoIPool ---------------------------------------------------------------


def test_roi_align_function_and_module():
    x = torch.randn(2, 3, 10, 12, dtype=torch.float64)
    rois = torch.tensor([[0, 1.0, 1.5, 8.0, 7.0], [1, 0.0, 2.0, 11.0, 9.5]], dtype=torch.float64)
    for sampling_ratio, aligned, mode in [(2, True, "avg"), (0, False, "avg"), (1, True, "max")]:
        _assert_same(
            lambda a: ops.roi_align(a, rois, (3, 2), 0.5, sampling_ratio, mode, aligned),
            lambda a: mmops.roi_align(a, rois, (3, 2), 0.5, sampling_ratio, mode, aligned),
            x,
        )
    # mmcv: sampling_ratio <= 0 is adaptive
    torch.testing.assert_close(ops.roi_align(x, rois, 2, 1.0, -1), mmops.roi_align(x, rois, 2, 1.0, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = ops.RoIAlign(out_size=3, sample_num=2, spatial_scale=0.5)  # mmcv's deprecated names
    assert old.output_size == (3, 3) and old.sampling_ratio == 2
    new = ops.RoIAlign(3, 0.5, 2, "avg", True, False)
    torch.testing.assert_close(old(x, rois), new(x, rois))
    torch.testing.assert_close(new(x, rois), mmops.roi_align(x, rois, 3, 0.5, 2))


def test_roi_align_known_vector():
    # mmcv's test_roi_align: pool 2x2, scale 1, sampling 2, aligned=True
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]], requires_grad=True)
    rois = torch.tensor([[0.0, 0.0, 0.0, 1.0, 1.0]])
    out = ops.roi_align(x, rois, (2, 2), 1.0, 2, "avg", True)
    torch.testing.assert_close(out, torch.tensor([[[[1.0, 1.25], [1.5, 1.75]]]]))
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([[[[3.0625, 0.4375], [0.4375, 0.0625]]]]))


def test_roi_pool_function_and_module():
    x = torch.randn(1, 2, 9, 9, dtype=torch.float64)
    rois = torch.tensor([[0, 0.0, 0.0, 6.0, 7.0], [0, 2.0, 1.0, 8.0, 8.0]], dtype=torch.float64)
    _assert_same(lambda a: ops.roi_pool(a, rois, (2, 3), 1.0), lambda a: mmops.roi_pool(a, rois, (2, 3), 1.0), x)
    torch.testing.assert_close(ops.RoIPool((2, 3), 1.0)(x, rois), mmops.roi_pool(x, rois, (2, 3)))
    assert MODELS.get("RoIPool") is None or True  # mmcv registers no RoIPool; mmdet reads it from mmcv.ops


# --- deformable convolution --------------------------------------------------------


def _deform_inputs(dg=1, modulated=False):
    torch.manual_seed(0)
    x = torch.randn(2, 4, 6, 7, dtype=torch.float64)
    weight = torch.randn(6, 2, 3, 3, dtype=torch.float64)  # groups=2
    offset = torch.randn(2, 2 * dg * 9, 6, 7, dtype=torch.float64)
    mask = torch.rand(2, dg * 9, 6, 7, dtype=torch.float64)
    return x, weight, offset, mask


def test_deform_conv2d_mmcv_argument_order():
    x, weight, offset, _ = _deform_inputs(dg=2)
    _assert_same(
        # mmcv: input, offset, weight, stride, padding, dilation, groups, deform_groups, bias, im2col_step
        lambda a, o, w: ops.deform_conv2d(a, o, w, 1, 1, 1, 2, 2, False, 32),
        lambda a, o, w: mmops.deform_conv2d(a, o, w, None, 1, 1, 1, 2, 2),
        x,
        offset,
        weight,
    )
    with pytest.raises(ValueError, match="bias"):
        ops.deform_conv2d(x, offset, weight, 1, 1, 1, 2, 2, True)
    # mmcv runs in offset's dtype
    assert ops.deform_conv2d(x.float(), offset, weight.float(), 1, 1, 1, 2, 2).dtype == torch.float64


def test_deform_conv_modules_aliases_and_registry():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcn = ops.DeformConv2dPack(4, 6, 3, padding=1, deformable_groups=2)  # mmcv's deprecated name
    assert dcn.deform_groups == 2
    x = torch.randn(1, 4, 5, 5)
    # zero-initialised offsets: a plain convolution
    torch.testing.assert_close(dcn(x), F.conv2d(x, dcn.weight, padding=1), rtol=1e-5, atol=1e-5)
    built = MODELS.build(dict(type="DCN", in_channels=4, out_channels=6, kernel_size=3, padding=1))
    assert type(built) is ops.DeformConv2dPack
    built2 = MODELS.build(dict(type="DCNv2", in_channels=4, out_channels=6, kernel_size=3, padding=1))
    assert type(built2) is ops.ModulatedDeformConv2dPack
    # mask sigmoid(0) = 1/2 at init
    expected = 0.5 * F.conv2d(x, built2.weight, padding=1) + built2.bias[None, :, None, None]
    torch.testing.assert_close(built2(x), expected, rtol=1e-5, atol=1e-5)
    out = built2(x)
    out.sum().backward()
    assert built2.conv_offset.weight.grad is not None and built2.weight.grad is not None


def test_modulated_deform_conv2d_mmcv_argument_order():
    x, weight, offset, mask = _deform_inputs()
    bias = torch.randn(6, dtype=torch.float64)
    _assert_same(
        lambda a, o, m, w, b: ops.modulated_deform_conv2d(a, o, m, w, b, 1, 1, 1, 2, 1),
        lambda a, o, m, w, b: mmops.modulated_deform_conv2d(a, o, m, w, b, 1, 1, 1, 2, 1),
        x,
        offset,
        mask,
        weight,
        bias,
    )
    module = ops.ModulatedDeformConv2d(4, 6, 3, padding=1, groups=2).double()
    torch.testing.assert_close(
        module(x, offset, mask), mmops.modulated_deform_conv2d(x, offset, mask, module.weight, module.bias, 1, 1, 1, 2)
    )


def test_sac_runs_on_mmops():
    sac = MODELS.build(dict(type="SAC", in_channels=4, out_channels=4, kernel_size=3, padding=1, use_deform=True))
    out = sac(torch.randn(1, 4, 8, 8))
    out.sum().backward()
    assert out.shape == (1, 4, 8, 8)


# --- multi-scale deformable attention ---------------------------------------------


def _msda_inputs():
    torch.manual_seed(0)
    shapes = torch.tensor([[4, 5], [2, 3]])
    start = torch.tensor([0, 20])
    value = torch.randn(2, 26, 2, 4, dtype=torch.float64)
    loc = torch.rand(2, 3, 2, 2, 2, 2, dtype=torch.float64)
    weights = torch.rand(2, 3, 2, 2, 2, dtype=torch.float64)
    return value, shapes, start, loc, weights


def test_msda_function_matches_mmops_and_mmcv_pytorch():
    from mmcv.ops.multi_scale_deform_attn import (
        MultiScaleDeformableAttnFunction,
        multi_scale_deformable_attn_pytorch,
    )

    value, shapes, start, loc, weights = _msda_inputs()
    _assert_same(
        lambda v, l_, w: MultiScaleDeformableAttnFunction.apply(v, shapes, start, l_, w, 64),
        lambda v, l_, w: mmops.ms_deform_attn(v, shapes, start, l_, w),
        value,
        loc,
        weights,
    )
    out, grads = _grads(
        lambda v, l_, w: MultiScaleDeformableAttnFunction.apply(v, shapes, start, l_, w, 64), value, loc, weights
    )
    ref, ref_grads = _grads(lambda v, l_, w: multi_scale_deformable_attn_pytorch(v, shapes, l_, w), value, loc, weights)
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)


def test_msda_module_mmcv_forward_and_checkpoint():
    torch.manual_seed(0)
    module = MODELS.build(
        dict(type="MultiScaleDeformableAttention", embed_dims=16, num_heads=2, num_levels=2, num_points=2)
    )
    module.eval()
    ours = mmops.MultiScaleDeformableAttention(16, 2, 2, 2).eval()
    ours.load_state_dict(module.state_dict())  # the same parameter names
    module.load_state_dict(ours.state_dict())
    shapes = torch.tensor([[4, 5], [2, 3]])
    query = torch.randn(7, 2, 16)
    value = torch.randn(26, 2, 16)
    ref_points = torch.rand(2, 7, 2, 2)
    mask = torch.zeros(2, 26, dtype=torch.bool)
    mask[1, -3:] = True
    out = module(
        query,
        value=value,
        reference_points=ref_points,
        spatial_shapes=shapes,
        level_start_index=torch.tensor([0, 20]),
        key_padding_mask=mask,
        key_pos=torch.randn(26, 2, 16),  # mmdet passes these; ignored as in mmcv
        valid_ratios=torch.ones(2, 2, 2),
    )
    expected = ours(query, value=value, reference_points=ref_points, spatial_shapes=shapes, key_padding_mask=mask)
    torch.testing.assert_close(out, expected)
    # mmcv's deprecated name of identity
    identity = torch.randn(7, 2, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = module(query, value=value, residual=identity, reference_points=ref_points, spatial_shapes=shapes)
    plain = ours(query, value=value, reference_points=ref_points, spatial_shapes=shapes)
    torch.testing.assert_close(old - identity, plain - query)


# --- NMS family ---------------------------------------------------------------------

BOXES = np.array(
    [
        [49.1, 32.4, 51.0, 35.9],
        [49.3, 32.9, 51.0, 35.3],
        [49.2, 31.8, 51.0, 35.4],
        [35.1, 11.5, 39.1, 15.7],
        [35.6, 11.8, 39.3, 14.2],
        [35.3, 11.5, 39.9, 14.5],
        [35.2, 11.7, 39.7, 15.7],
    ],
    dtype=np.float32,
)
SCORES = np.array([0.9, 0.9, 0.5, 0.5, 0.5, 0.4, 0.3], dtype=np.float32)


def test_nms_numpy_in_out_and_aliases():
    dets, inds = ops.nms(BOXES, SCORES, 0.6)  # mmcv's docstring example: 3 kept
    assert isinstance(dets, np.ndarray) and isinstance(inds, np.ndarray)
    assert len(inds) == len(dets) == 3
    keep = torch.ops.mmops.nms(torch.from_numpy(BOXES), torch.from_numpy(SCORES), 0.6)
    np.testing.assert_array_equal(inds, keep.numpy())
    np.testing.assert_allclose(dets, np.concatenate([BOXES[inds], SCORES[inds, None]], 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, inds_old = ops.nms(BOXES, SCORES, iou_thr=0.6)
    np.testing.assert_array_equal(inds_old, inds)
    t_dets, t_inds = ops.nms(torch.from_numpy(BOXES), torch.from_numpy(SCORES), 0.6, offset=1)
    expected = mmops.nms(torch.from_numpy(BOXES), torch.from_numpy(SCORES), 0.6, offset=1)
    torch.testing.assert_close(t_inds, expected[1])
    torch.testing.assert_close(t_dets, expected[0])
    _, few = ops.nms(BOXES, SCORES, 0.6, score_threshold=0.45, max_num=2)
    assert list(few) == list(inds[:2])


def test_soft_nms_numpy_and_methods():
    boxes = np.array(
        [
            [4.0, 3.0, 5.0, 3.0],
            [4.0, 3.0, 5.0, 4.0],
            [3.0, 1.0, 3.0, 1.0],
            [3.0, 1.0, 3.0, 1.0],
            [3.0, 1.0, 3.0, 1.0],
            [3.0, 1.0, 3.0, 1.0],
        ],
        dtype=np.float32,
    )
    scores = np.array([0.9, 0.9, 0.5, 0.5, 0.4, 0.0], dtype=np.float32)
    dets, inds = ops.soft_nms(boxes, scores, 0.6, sigma=0.5)  # mmcv's docstring: 5 kept
    assert isinstance(dets, np.ndarray) and len(inds) == len(dets) == 5
    for method in ("naive", "linear", "gaussian"):
        for offset in (0, 1):
            d, i = ops.soft_nms(torch.from_numpy(BOXES), torch.from_numpy(SCORES), 0.3, 0.5, 1e-3, method, offset)
            e_d, e_i = mmops.soft_nms(torch.from_numpy(BOXES), torch.from_numpy(SCORES), 0.3, 0.5, 1e-3, method, offset)
            torch.testing.assert_close(i, e_i)
            torch.testing.assert_close(d, e_d)


def test_batched_nms_cfg_conventions():
    torch.manual_seed(0)
    boxes = torch.rand(60, 4) * 50
    boxes[:, 2:] += boxes[:, :2] + 5
    scores = torch.rand(60)
    idxs = torch.randint(0, 4, (60,))
    dets, keep = ops.batched_nms(boxes, scores, idxs, dict(type="nms", iou_threshold=0.5))
    _, expected = mmops.batched_nms(boxes, scores, idxs, dict(type="nms", iou_threshold=0.5))
    assert sorted(keep.tolist()) == sorted(expected.tolist())
    torch.testing.assert_close(dets[:, 4], scores[keep])
    # split_thr below the box count: mmcv's per-class loop, same result
    _, split = ops.batched_nms(boxes, scores, idxs, dict(type="nms", iou_threshold=0.5, split_thr=10))
    assert sorted(split.tolist()) == sorted(keep.tolist())
    _, few = ops.batched_nms(boxes, scores, idxs, dict(type="nms", iou_threshold=0.5, split_thr=10, max_num=5))
    assert few.tolist() == split[:5].tolist()
    # the type may be a callable
    _, by_callable = ops.batched_nms(boxes, scores, idxs, dict(type=ops.nms, iou_threshold=0.5))
    assert by_callable.tolist() == keep.tolist()
    _, agnostic = ops.batched_nms(boxes, scores, idxs, dict(type="nms", iou_threshold=0.5), class_agnostic=True)
    assert sorted(agnostic.tolist()) == sorted(torch.ops.mmops.nms(boxes, scores, 0.5).tolist())
    soft_dets, soft_keep = ops.batched_nms(
        boxes, scores, idxs, dict(type="soft_nms", iou_threshold=0.5, min_score=0.05)
    )
    assert soft_keep.numel() >= keep.numel() and (soft_dets[:-1, 4] >= soft_dets[1:, 4]).all()
    none_dets, order = ops.batched_nms(boxes, scores, idxs, None)
    assert order.tolist() == scores.argsort(descending=True).tolist()


def test_nms_match_wired_lazily(monkeypatch):
    dets = torch.tensor([[0.0, 0.0, 10.0, 10.0, 0.9], [1.0, 1.0, 10.0, 10.0, 0.8], [20.0, 20.0, 30.0, 30.0, 0.7]])
    assert ops.nms_match(dets[:0], 0.5) == []
    calls = []

    def fake_nms_match(d, thr):
        calls.append(thr)
        return [torch.tensor([0, 1]), torch.tensor([2])]

    monkeypatch.setattr(mmops, "nms_match", fake_nms_match, raising=False)
    groups = ops.nms_match(dets, 0.5)
    assert [g.tolist() for g in groups] == [[0, 1], [2]] and groups[0].dtype == torch.long
    np_groups = ops.nms_match(dets.numpy(), 0.5)
    assert isinstance(np_groups[0], np.ndarray) and calls == [0.5, 0.5]
    monkeypatch.delattr(mmops, "nms_match")
    with pytest.raises(NotImplementedError, match="nms_match"):
        ops.nms_match(dets, 0.5)


# --- box overlaps and focal losses -------------------------------------------------


def test_bbox_overlaps_known_vector_and_mmops():
    b1 = torch.tensor([[0.0, 0.0, 10.0, 10.0], [10.0, 10.0, 20.0, 20.0], [32.0, 32.0, 38.0, 42.0]])
    b2 = torch.tensor([[0.0, 0.0, 10.0, 20.0], [0.0, 10.0, 10.0, 19.0], [10.0, 10.0, 20.0, 20.0]])
    # mmcv's docstring
    torch.testing.assert_close(
        ops.bbox_overlaps(b1, b2), torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    )
    for mode in ("iou", "iof"):
        for aligned in (False, True):
            for offset in (0, 1):
                torch.testing.assert_close(
                    ops.bbox_overlaps(b1, b2, mode, aligned, offset), mmops.bbox_overlaps(b1, b2, mode, aligned, offset)
                )
    assert ops.bbox_overlaps(b1[:0], b2).shape == (0, 3)


def _focal_reference(x, target, gamma, alpha):
    """mmcv's sigmoid focal loss in plain float64 torch ([N, C], target C = background)."""
    p = torch.sigmoid(x)
    onehot = F.one_hot(target, x.size(1) + 1)[:, : x.size(1)].to(x.dtype)
    pt = torch.where(onehot > 0, p, 1 - p)
    at = torch.where(onehot > 0, torch.full_like(p, alpha), torch.full_like(p, 1 - alpha))
    return -at * (1 - pt) ** gamma * torch.log(pt)


def test_focal_losses():
    torch.manual_seed(0)
    x = torch.randn(6, 4, dtype=torch.float64)
    target = torch.tensor([0, 3, 4, 1, 2, 4])
    weight = torch.rand(4, dtype=torch.float64)
    for reduction in ("none", "mean", "sum"):
        _assert_same(
            lambda a: ops.sigmoid_focal_loss(a, target, 2.0, 0.25, weight, reduction),
            lambda a: mmops.sigmoid_focal_loss(a, target, 2.0, 0.25, weight, reduction),
            x,
        )
        _assert_same(
            lambda a: ops.softmax_focal_loss(a, target.clamp(max=3), 2.0, 0.25, weight, reduction),
            lambda a: mmops.softmax_focal_loss(a, target.clamp(max=3), 2.0, 0.25, weight, reduction),
            x,
        )
    torch.testing.assert_close(
        ops.sigmoid_focal_loss(x, target, 2.0, 0.25, None, "none"), _focal_reference(x, target, 2.0, 0.25)
    )
    loss = ops.SigmoidFocalLoss(2.0, 0.25)(x, target)
    torch.testing.assert_close(loss, _focal_reference(x, target, 2.0, 0.25).sum() / x.size(0))
    torch.testing.assert_close(
        ops.SoftmaxFocalLoss(2.0, 0.25, weight, "sum")(x, target.clamp(max=3)),
        mmops.softmax_focal_loss(x, target.clamp(max=3), 2.0, 0.25, weight, "sum"),
    )


# --- prroi_pool ------------------------------------------------------------------


def test_prroi_pool_routes_to_mmops():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 11, dtype=torch.double, requires_grad=True)
    rois = torch.tensor([[0, 1.2, 0.7, 14.5, 12.1], [1, 3.3, 2.0, 9.9, 15.8]], dtype=torch.double, requires_grad=True)
    for via in (lambda a, r: ops.prroi_pool(a, r, (3, 2), 0.5), lambda a, r: ops.PrRoIPool((3, 2), 0.5)(a, r)):
        _assert_same(lambda a: via(a, rois), lambda a: mmops.prroi_pool(a, rois, (3, 2), 0.5), x)
        # the roi coordinates get their true gradient (mmcv's own backward misplaces it)
        g = torch.randn(2, 3, 3, 2, dtype=torch.double)
        (got,) = torch.autograd.grad(via(x, rois), rois, g)
        (want,) = torch.autograd.grad(mmops.prroi_pool(x, rois, (3, 2), 0.5), rois, g)
        torch.testing.assert_close(got, want)
        assert got[:, 1:].abs().sum() > 0 and bool((got[:, 0] == 0).all())


# --- TINShift -------------------------------------------------------------------------


def test_tin_shift_routed():
    assert "mmcv.ops.tin_shift.TINShiftFunction" in mmops.mmcv_ops.routed_ops()
    x = torch.randn(2, 4, 6, 5, dtype=torch.float64)
    shift = torch.tensor([[1, -2, 5], [0, 3, -1]], dtype=torch.int32)
    _assert_same(lambda a: ops.tin_shift(a, shift), lambda a: mmops.tin_shift(a, shift), x)
    _assert_same(lambda a: ops.TINShift()(a, shift), lambda a: mmops.TINShift()(a, shift), x)
    with pytest.raises(ValueError, match="multiple of num_segments"):
        ops.tin_shift(x, torch.zeros(2, 4, dtype=torch.int32))


# --- Correlation -----------------------------------------------------------------------


def test_correlation_routed():
    assert "mmcv.ops.correlation.CorrelationFunction" in mmops.mmcv_ops.routed_ops()
    a, b = torch.randn(2, 3, 6, 7, dtype=torch.float64), torch.randn(2, 3, 6, 7, dtype=torch.float64)
    _assert_same(
        lambda x, y: ops.Correlation(3, 2, 1, 1, 1, 2)(x, y),
        lambda x, y: mmops.Correlation(3, 2, 1, 1, 1, 2)(x, y),
        a,
        b,
    )
    assert repr(ops.Correlation(3, 2)) == repr(mmops.Correlation(3, 2))


def test_bias_act_routed():
    """mmcv.ops.bias_act (a module function: mmcv's composite off CUDA) runs mmops's op on every
    device; its ext kernel is served."""
    from mmops.mmcv_ops import _ext

    mmcv_bias_act = sys.modules["mmcv.ops.bias_act"]

    torch.manual_seed(0)
    x, b = torch.randn(2, 3, 4, 4, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    for act in ("lrelu", "swish", "tanh"):
        exp = torch.ops.mmops.bias_act(x, b, 1, act, None, None, 1.0)
        torch.testing.assert_close(ops.bias_act(x, b, act=act, clamp=1.0), exp, rtol=0, atol=0)
        torch.testing.assert_close(mmcv_bias_act._bias_act_ref(x, b, act=act, clamp=1.0), exp, rtol=1e-12, atol=1e-12)
    # mmcv's arguments: alpha as an int, use_custom_op, a bias of another dtype (cast to input's)
    exp = torch.ops.mmops.bias_act(x, b, 1, "lrelu", 1.0, None, None)
    torch.testing.assert_close(ops.bias_act(x, b.float(), 1, "lrelu", 1, None, None, False), exp.float().double())
    assert "bias_act" in _ext.SERVED


# --- ops other families add to mmops, and unserved kernels -------------------------


def test_unserved_kernels_raise_naming_the_op():
    ext = sys.modules["mmcv._ext"]
    with pytest.raises(NotImplementedError, match="'indice_conv'"):
        ext.indice_conv_forward()


NEW_OPS = [
    # (mmops name, how mmcv's Python reaches it)
    ("carafe", lambda: MODELS.build(dict(type="carafe", channels=4, scale_factor=2))(torch.randn(1, 4, 5, 5))),
    ("carafe_naive", lambda: ops.CARAFENaive(5, 1, 2)(torch.randn(1, 4, 5, 5), torch.rand(1, 25, 10, 10))),
    ("masked_conv2d", lambda: ops.MaskedConv2d(2, 3, 3, padding=1)(torch.randn(1, 2, 5, 5), torch.ones(1, 5, 5))),
    (
        "deform_roi_pool",
        lambda: ops.DeformRoIPoolPack(2, 4, 8)(torch.randn(1, 4, 8, 8), torch.tensor([[0.0, 1.0, 1.0, 6.0, 6.0]])),
    ),
]


@pytest.mark.parametrize("name,call", NEW_OPS, ids=[n for n, _ in NEW_OPS])
def test_new_ops_wired_by_name(monkeypatch, name, call):
    if not hasattr(mmops, name):
        with pytest.raises(NotImplementedError, match=name):
            call()
    seen = []

    def fake(*args):
        seen.append(args)
        return torch.zeros(1, 4, 10, 10) if "carafe" in name else torch.zeros(1, 4, 2, 2)

    monkeypatch.setattr(mmops, name, fake, raising=False)
    try:
        call()
    except Exception:  # the fake's shapes need not suit the module's next layers
        pass
    assert seen, f"mmcv's {name} did not reach mmops.{name}"


def test_new_ops_argument_order(monkeypatch):
    got = {}
    monkeypatch.setattr(mmops, "carafe", lambda *a: got.setdefault("carafe", a) and a[0], raising=False)
    monkeypatch.setattr(mmops, "deform_roi_pool", lambda *a: got.setdefault("dpool", a) and a[0], raising=False)
    f, m = torch.randn(1, 4, 5, 5), torch.rand(1, 25, 10, 10)
    ops.carafe(f, m, 5, 1, 2)
    assert got["carafe"][0] is f and got["carafe"][1] is m and got["carafe"][2:] == (5, 1, 2)
    x, rois, off = torch.randn(1, 4, 8, 8), torch.tensor([[0.0, 1, 1, 6, 6]]), torch.zeros(1, 2, 3, 3)
    ops.deform_roi_pool(x, rois, off, (3, 3), 0.5, 2, 0.1)
    assert got["dpool"][2] is off and got["dpool"][3:] == ((3, 3), 0.5, 2, 0.1)


# --- MMSyncBN ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world_of_one(tmp_path_factory):
    import torch.distributed as dist

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    if not dist.is_initialized():
        store = tmp_path_factory.mktemp("dist") / "store"
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("stats_mode", ["default", "N"])
def test_mmsyncbn_single_process_is_batchnorm(world_of_one, stats_mode):
    torch.manual_seed(0)
    sync = MODELS.build(dict(type="MMSyncBN", num_features=3, stats_mode=stats_mode))
    assert type(sync) is ops.SyncBatchNorm
    bn = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(sync.weight)
        bn.bias.copy_(sync.bias)
    x = torch.randn(4, 3, 5, 6) * 3 + 1
    for _ in range(2):  # running statistics after two steps
        xs, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        out_s, out_b = sync(xs), bn(xb)
        torch.testing.assert_close(out_s, out_b, rtol=1e-5, atol=1e-5)
        g = torch.randn_like(out_s)
        out_s.backward(g)
        out_b.backward(g)
        torch.testing.assert_close(xs.grad, xb.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(sync.weight.grad, bn.weight.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(sync.bias.grad, bn.bias.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(sync.running_mean, bn.running_mean)
    torch.testing.assert_close(sync.running_var, bn.running_var)
    assert int(sync.num_batches_tracked) == 2
    sync.eval()
    bn.eval()
    torch.testing.assert_close(sync(x), bn(x))


def test_mmsyncbn_empty_batch_keeps_running_stats(world_of_one):
    sync = ops.SyncBatchNorm(2, stats_mode="N")
    out = sync(torch.zeros(0, 2, 3, 3, requires_grad=True))
    out.sum().backward()
    assert out.shape == (0, 2, 3, 3)
    torch.testing.assert_close(sync.running_mean, torch.zeros(2))
    torch.testing.assert_close(sync.running_var, torch.ones(2))


def test_launcher_runs_a_script_with_the_bridge(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys, mmcv.ops\nprint('ok', mmcv.ops.get_compiler_version(), sys.argv[1:])\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run(
        [sys.executable, "-m", "mmops.mmcv_ops", str(script), "--flag"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "ok mmops" in result.stdout and "['--flag']" in result.stdout


def test_deform_offsets_of_a_larger_map_read_as_mmcv():
    # mmcv's kernels read sample b's offsets as the first values of offset[b]
    # (mmdet's DyHead passes a finer level's offsets to a coarser level's conv)
    torch.manual_seed(0)
    x = torch.randn(2, 4, 4, 5, dtype=torch.float64)
    weight = torch.randn(3, 4, 3, 3, dtype=torch.float64)
    offset = torch.randn(2, 18, 8, 10, dtype=torch.float64)
    mask = torch.rand(2, 9, 8, 10, dtype=torch.float64)
    head = offset.reshape(2, -1)[:, : 18 * 20].reshape(2, 18, 4, 5)
    mask_head = mask.reshape(2, -1)[:, : 9 * 20].reshape(2, 9, 4, 5)
    torch.testing.assert_close(
        ops.modulated_deform_conv2d(x, offset, mask, weight, None, 1, 1, 1, 1, 1),
        mmops.modulated_deform_conv2d(x, head, mask_head, weight, None, 1, 1, 1, 1, 1),
    )
    with pytest.raises(RuntimeError, match="offset"):  # too small: mmops's check
        ops.modulated_deform_conv2d(x, offset[:, :, :2, :2], mask, weight, None, 1, 1, 1, 1, 1)
    # DCNv1: mmcv checks the offset's spatial size ("invalid spatial size of offset"), as mmops does
    with pytest.raises(RuntimeError, match="offset"):
        ops.deform_conv2d(x, offset, weight, 1, 1, 1, 1, 1)


def test_empty_inputs_forward_and_backward():
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    out = ops.roi_align(x, torch.zeros(0, 5), 2, 1.0, 2)
    out.sum().backward()
    assert out.shape == (0, 2, 2, 2) and x.grad.abs().sum() == 0
    dets, inds = ops.nms(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), 0.5)
    assert dets.shape == (0, 5) and inds.shape == (0,)
    # class-agnostic only: mmcv's class-aware batched_nms takes boxes.max() of no boxes and raises (kept as mmcv)
    empty = (torch.zeros(0, 4), torch.zeros(0), torch.zeros(0, dtype=torch.long))
    dets, keep = ops.batched_nms(*empty, dict(iou_threshold=0.5), class_agnostic=True)
    assert dets.shape == (0, 5) and keep.numel() == 0
    loss = ops.sigmoid_focal_loss(
        torch.zeros(0, 3, requires_grad=True), torch.zeros(0, dtype=torch.long), 2.0, 0.25, None, "sum"
    )
    loss.backward()
    assert loss.item() == 0


@pytest.mark.cuda
def test_cuda_entry_points_match_cpu():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 12, dtype=torch.float64)
    rois = torch.tensor([[0, 1.0, 1.5, 8.0, 7.0], [1, 0.0, 2.0, 11.0, 9.5]], dtype=torch.float64)
    torch.testing.assert_close(ops.RoIAlign(3, 0.5, 2)(x.cuda(), rois.cuda()).cpu(), ops.RoIAlign(3, 0.5, 2)(x, rois))
    value, shapes, start, loc, weights = _msda_inputs()
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction

    torch.testing.assert_close(
        MultiScaleDeformableAttnFunction.apply(
            value.cuda(), shapes.cuda(), start.cuda(), loc.cuda(), weights.cuda(), 64
        ).cpu(),
        MultiScaleDeformableAttnFunction.apply(value, shapes, start, loc, weights, 64),
    )
    dcn = ops.ModulatedDeformConv2dPack(4, 6, 3, padding=1).double()
    xin = torch.randn(1, 4, 7, 7, dtype=torch.float64)
    torch.testing.assert_close(dcn.cuda()(xin.cuda()).cpu(), dcn.cpu()(xin))
    b = torch.from_numpy(BOXES)
    s = torch.from_numpy(SCORES)
    assert ops.nms(b.cuda(), s.cuda(), 0.6)[1].cpu().tolist() == ops.nms(b, s, 0.6)[1].tolist()


def _sync_bn_worker(rank: int, store: str, stats_mode: str) -> None:
    """One of two processes: rank 0 has 2 samples, rank 1 has 1 (the modes differ then)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        xs = [torch.randn(2, 3, 4, 5, dtype=torch.float64) * 2 + 1, torch.randn(1, 3, 4, 5, dtype=torch.float64) - 3]
        gs = [torch.randn_like(x) for x in xs]
        sync = ops.SyncBatchNorm(3, stats_mode=stats_mode).double()
        with torch.no_grad():
            sync.weight.copy_(torch.tensor([0.5, 1.0, 2.0]))
            sync.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
        x = xs[rank].clone().requires_grad_(True)
        out = sync(x)
        out.backward(gs[rank])
        # mmcv's formulas, written out: per-process means combined equally ("default") or by batch size ("N")
        n = [t.size(0) for t in xs]
        share = [0.5, 0.5] if stats_mode == "default" else [k / sum(n) for k in n]
        mean = sum(s * t.mean(dim=(0, 2, 3)) for s, t in zip(share, xs))
        var = sum(s * ((t - mean[:, None, None]) ** 2).mean(dim=(0, 2, 3)) for s, t in zip(share, xs))
        std = torch.sqrt(var + 1e-5)
        norm = (xs[rank] - mean[:, None, None]) / std[:, None, None]
        w, b = sync.weight.detach(), sync.bias.detach()
        torch.testing.assert_close(out, norm * w[:, None, None] + b[:, None, None])
        count = n[rank] * 20 * 2
        torch.testing.assert_close(sync.running_mean, 0.1 * mean)
        torch.testing.assert_close(sync.running_var, 0.9 + 0.1 * var * count / (count - 1))
        norms = [(t - mean[:, None, None]) / std[:, None, None] for t in xs]
        gw = sum((g * m).sum(dim=(0, 2, 3)) for g, m in zip(gs, norms)) / 2
        gb = sum(g.sum(dim=(0, 2, 3)) for g in gs) / 2
        torch.testing.assert_close(sync.weight.grad, gw)
        torch.testing.assert_close(sync.bias.grad, gb)
        factor = n[rank] * 20
        expected = (w / std)[:, None, None] * (gs[rank] - (gw[:, None, None] * norm + gb[:, None, None]) / factor)
        torch.testing.assert_close(x.grad, expected)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("stats_mode", ["default", "N"])
def test_mmsyncbn_two_processes_follow_mmcv(tmp_path, stats_mode):
    import torch.multiprocessing as mp

    mp.spawn(_sync_bn_worker, args=(str(tmp_path / "store"), stats_mode), nprocs=2, join=True)


def test_import_mmops_alone_leaves_mmcv_alone():
    code = "import sys, mmops; print('mmops.mmcv_ops' in sys.modules, 'mmcv' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


def test_uninstall_restores_mmcv_and_install_reroutes():
    roi_align_module = sys.modules["mmcv.ops.roi_align"]

    routed = roi_align_module.roi_align
    mmops.mmcv_ops.uninstall()
    try:
        assert not mmops.mmcv_ops.is_installed()
        assert roi_align_module.roi_align is not routed
        assert getattr(roi_align_module.roi_align, "__name__", "") == "apply"  # mmcv's Function.apply again
    finally:
        mmops.mmcv_ops.install()
    assert mmops.mmcv_ops.is_installed() and roi_align_module.roi_align is routed


def test_text_grouping_ops():
    """mmcv.ops.contour_expand / pixel_group (mmcv's Python on the served ext kernels):
    mmcv's own test vectors, numpy and tensors in, mmcv's lists out."""
    from test_contour_expand import MMCV_GT, MMCV_LABEL, MMCV_MASK1
    from test_pixel_group import MMCV_GT1, MMCV_GT2, mmcv_inputs

    mask = np.stack([MMCV_MASK1, (MMCV_LABEL > 0).astype(np.uint8)])
    for args in ((mask, MMCV_LABEL), (torch.from_numpy(mask), torch.from_numpy(MMCV_LABEL))):
        result = ops.contour_expand(*args, 1, 3)
        assert isinstance(result, list) and result == MMCV_GT.tolist()
    inputs = mmcv_inputs()
    for args in (inputs, [torch.from_numpy(a) for a in inputs]):
        result = ops.pixel_group(*args, 3, 0.8)
        assert result == [[0.0, 0.0], MMCV_GT1, MMCV_GT2]
