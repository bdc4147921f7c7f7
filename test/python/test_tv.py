"""mmops.tv's RoI ops (roi_align, roi_pool, RoIAlign, RoIPool, MultiScaleRoIAlign): the
assertions of torchvision's own tests (test/test_ops.py) against mmops.tv, with this
project's float64 references as the expected values, then mmops.tv == torchvision
(when it is installed) on random and edge inputs. Boxes: test_tv_boxes.py; deformable
convolution: test_tv_deform.py."""

import math
from collections import OrderedDict
from typing import List

import pytest
import torch
from conftest import TOL, random_rois, requires_torchvision
from roi_align_reference import roi_align_ref
from test_roi_pool import roi_pool_ref
from torch.autograd import gradcheck

from mmops import tv

# torchvision's test rois (batch index, x1, y1, x2, y2) on 10 x 10 maps
TV_ROIS = [[0, 0, 0, 9, 9], [0, 0, 5, 4, 9], [0, 5, 5, 9, 9], [1, 0, 0, 9, 9]]
GRAD_ROIS = [[0, 0, 0, 4, 4], [0, 0, 2, 3, 4], [0, 2, 2, 4, 4]]


def _align_expected(x, rois, pool, scale, sampling_ratio, aligned):
    # torchvision's adaptive grid is any sampling_ratio <= 0, the reference's is 0
    return roi_align_ref(x, rois, pool, scale, max(sampling_ratio, 0), "avg", aligned)


def _pool_expected(x, rois, pool, scale):
    return roi_pool_ref(x, rois, (pool, pool) if isinstance(pool, int) else pool, scale)[0]


def _maybe_permuted(x, contiguous):
    return x if contiguous else x.permute(0, 1, 3, 2)


# ----------------------------------------------------------------------------- torchvision's assertions


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64], ids=str)
def test_roi_align_forward(dtype, contiguous, aligned):
    torch.manual_seed(0)
    x = _maybe_permuted(torch.rand(2, 50, 10, 10, dtype=dtype), contiguous)
    rois = torch.tensor(TV_ROIS, dtype=dtype)
    y = tv.RoIAlign((5, 5), spatial_scale=1, sampling_ratio=-1, aligned=aligned)(x, rois)
    assert y.dtype == x.dtype
    tol = 4e-3 if dtype == torch.float16 else 1e-5
    expected = _align_expected(x, rois, (5, 5), 1.0, -1, aligned)
    torch.testing.assert_close(expected.to(y), y, rtol=tol, atol=tol)


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64], ids=str)
def test_roi_pool_forward(dtype, contiguous):
    torch.manual_seed(0)
    x = _maybe_permuted(torch.rand(2, 50, 10, 10, dtype=dtype), contiguous)
    rois = torch.tensor(TV_ROIS, dtype=dtype)
    y = tv.RoIPool((5, 5), 1)(x, rois)
    assert y.dtype == x.dtype
    tol = 4e-3 if dtype == torch.float16 else 1e-5
    torch.testing.assert_close(_pool_expected(x, rois, 5, 1.0).to(y), y, rtol=tol, atol=tol)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("name", ["roi_align", "roi_pool"])
def test_backward_gradcheck(name, contiguous, seed):
    torch.manual_seed(seed)
    x = torch.rand(1, 8, 5, 5, dtype=torch.float64)
    x = _maybe_permuted(x, contiguous).detach().requires_grad_(True)
    rois = torch.tensor(GRAD_ROIS, dtype=torch.float64)
    if name == "roi_align":
        module = tv.RoIAlign((2, 2), spatial_scale=1, sampling_ratio=1)
    else:
        module = tv.RoIPool((2, 2), 1)
    gradcheck(lambda z: module(z, rois), (x,), atol=1e-5)
    scripted = torch.jit.script(getattr(tv, name))
    gradcheck(lambda z: scripted(z, rois, 2), (x,), atol=1e-5)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 0, 2])
def test_roi_align_gradcheck_settings(sampling_ratio, aligned):
    torch.manual_seed(1)
    x = torch.rand(2, 3, 6, 7, dtype=torch.float64, requires_grad=True)
    boxes = [torch.tensor([[0.3, 0.9, 4.2, 5.1]], dtype=torch.float64), torch.tensor([[1.2, 0.4, 6.6, 3.3]]).double()]
    gradcheck(lambda z: tv.roi_align(z, boxes, (2, 3), 0.9, sampling_ratio, aligned), (x,), atol=1e-6)


@pytest.mark.parametrize("fn", [tv.roi_align, tv.roi_pool])
def test_boxes_shape_asserts(fn):
    a = torch.linspace(1, 8 * 8, 8 * 8).reshape(1, 1, 8, 8)
    with pytest.raises(AssertionError, match=r"\[K, 5\]"):
        fn(a, torch.tensor([[0, 0, 3, 3]], dtype=a.dtype), output_size=(2, 2))
    with pytest.raises(AssertionError, match=r"\[Ki, 4\]"):
        fn(a, [torch.tensor([[0, 0, 3]], dtype=a.dtype)], output_size=(2, 2))


class _PoolWrapper(torch.nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, imgs: torch.Tensor, boxes: List[torch.Tensor]) -> torch.Tensor:
        return self.pool(imgs, boxes)


@pytest.mark.parametrize(
    "pool",
    [lambda: tv.RoIPool(output_size=[3, 3], spatial_scale=1.0), lambda: tv.RoIAlign([3, 3], 1.0, sampling_ratio=-1)],
)
def test_jit_boxes_list(pool):
    x = torch.rand(2, 1, 10, 10)
    roi = torch.tensor(TV_ROIS, dtype=torch.float).t()
    scripted = torch.jit.script(_PoolWrapper(pool()))
    assert scripted(x, [roi, roi]).shape == (10, 1, 3, 3)


@pytest.mark.parametrize("make", [lambda: tv.RoIPool((5, 5), 1), lambda: tv.RoIAlign((5, 5), 1, -1)])
def test_torch_fx_trace_is_one_node(make):
    module = make()
    graph_module = torch.fx.symbolic_trace(module)
    calls = [n for n in graph_module.graph.nodes if n.op not in ("placeholder", "output")]
    assert len(calls) == 1 and calls[0].op == "call_function"
    x = torch.rand(2, 50, 5, 5)
    rois = torch.tensor(TV_ROIS, dtype=torch.float)
    torch.testing.assert_close(graph_module(x, rois), module(x, rois), rtol=1e-5, atol=1e-5)


def test_reprs():
    expected = "RoIAlign(output_size=7, spatial_scale=0.25, sampling_ratio=2, aligned=False)"
    assert repr(tv.RoIAlign(7, 0.25, 2)) == expected
    assert repr(tv.RoIPool((7, 7), 0.5)) == "RoIPool(output_size=(7, 7), spatial_scale=0.5)"
    expected = "MultiScaleRoIAlign(featmap_names=['0'], output_size=(7, 7), sampling_ratio=2)"
    assert repr(tv.MultiScaleRoIAlign(["0"], (7, 7), 2)) == expected
    assert repr(tv.MultiScaleRoIAlign(["0"], 7, 2)) == expected


@requires_torchvision
def test_reprs_equal_torchvision():
    from torchvision import ops

    for args in [((7, 7), 0.25, 2), (7, 1, -1, True), ([3, 3], 1.0, 0)]:
        assert repr(tv.RoIAlign(*args)) == repr(ops.RoIAlign(*args))
    assert repr(tv.RoIPool([3, 3], 1.0)) == repr(ops.RoIPool([3, 3], 1.0))
    assert repr(tv.MultiScaleRoIAlign(["a", "b"], 5, 0)) == repr(ops.MultiScaleRoIAlign(["a", "b"], 5, 0))


# ----------------------------------------------------------------------------- against torchvision


def _inputs(dtype, seed, num_rois=12, spatial_scale=0.5):
    torch.manual_seed(seed)
    x = torch.randn(2, 3, 9, 11, dtype=dtype)
    rois = random_rois(num_rois, 2, 9, 11, dtype=dtype, spatial_scale=spatial_scale, ordered=True)
    return x, rois


def _as_list(rois):
    return [rois[rois[:, 0] == i, 1:] for i in range(2)]


def _fwd_bwd(fn, x, boxes):
    x = x.clone().requires_grad_(True)
    out = fn(x, boxes)
    out.backward(torch.ones_like(out))
    return out, x.grad


def _boxes_variants(rois):
    """[K, 5] rois, per-image lists, an empty image in the list, one box, no boxes."""
    empty_image = [rois[:0, 1:], rois[:, 1:]]
    return [rois, _as_list(rois), empty_image, rois[:1], rois[:0], [rois[:1, 1:]]]


@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 0, 2])
def test_roi_align_equals_torchvision(sampling_ratio, aligned, dtype):
    from torchvision import ops

    x, rois = _inputs(dtype, seed=sampling_ratio + 3)
    for boxes in _boxes_variants(rois):
        got = _fwd_bwd(lambda z, b: tv.roi_align(z, b, (3, 2), 0.5, sampling_ratio, aligned), x, boxes)
        exp = _fwd_bwd(lambda z, b: ops.roi_align(z, b, (3, 2), 0.5, sampling_ratio, aligned), x, boxes)
        for g, e in zip(got, exp):
            torch.testing.assert_close(g, e, **TOL[dtype])


@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_roi_pool_equals_torchvision(dtype):
    from torchvision import ops

    x, rois = _inputs(dtype, seed=5)
    for boxes in _boxes_variants(rois):
        got = _fwd_bwd(lambda z, b: tv.roi_pool(z, b, 3, 0.5), x, boxes)
        exp = _fwd_bwd(lambda z, b: ops.roi_pool(z, b, 3, 0.5), x, boxes)
        for g, e in zip(got, exp):
            torch.testing.assert_close(g, e, rtol=0, atol=0)


@requires_torchvision
def test_modules_equal_torchvision_on_unordered_boxes():
    """Boxes as random_rois makes them (degenerate, reversed, outside the map). Not
    aligned=True with an adaptive grid: torchvision fails on reversed boxes there
    (a negative grid size), mmops pools 0 (test_reversed_boxes_adaptive_aligned_pool_zeros)."""
    from torchvision import ops

    torch.manual_seed(7)
    x = torch.randn(2, 4, 12, 10, dtype=torch.float64)
    rois = random_rois(20, 2, 12, 10, dtype=torch.float64, spatial_scale=0.25)
    for args in [((2, 2), 0.25, -1, False), ((3, 3), 0.25, 2, True), (4, 0.25, 0, False)]:
        torch.testing.assert_close(tv.RoIAlign(*args)(x, rois), ops.RoIAlign(*args)(x, rois), **TOL[torch.float64])
    torch.testing.assert_close(tv.RoIPool(3, 0.25)(x, rois), ops.RoIPool(3, 0.25)(x, rois), rtol=0, atol=0)


def test_reversed_boxes_adaptive_aligned_pool_zeros():
    x = torch.randn(1, 2, 8, 8, dtype=torch.float64)
    rois = torch.tensor([[0, 6.0, 5.0, 1.0, 2.0], [0, 1.0, 2.0, 1.0, 2.0]], dtype=torch.float64)
    out = tv.roi_align(x, rois, 2, 1.0, -1, True)
    torch.testing.assert_close(out, torch.zeros(2, 2, 2, 2, dtype=torch.float64), rtol=0, atol=0)


def test_compile_roi_align_and_pool():
    x, rois = _inputs(torch.float32, seed=2)

    def head(x, rois):
        return tv.roi_align(x, rois, 2, 0.5, -1, False) + tv.roi_pool(x, rois, 2, 0.5)

    compiled = torch.compile(head, fullgraph=True, dynamic=True)
    torch.testing.assert_close(compiled(x, rois), head(x, rois))
    torch.testing.assert_close(compiled(x, rois[:5]), head(x, rois[:5]))


# ----------------------------------------------------------------------------- MultiScaleRoIAlign


def _level_ref(boxes, k_min, k_max, canonical_scale=224, canonical_level=4):
    """float64 FPN level (0 = k_min) of each box: floor(k0 + log2(sqrt(area) / s0) + 1e-6)."""
    levels = []
    for x1, y1, x2, y2 in torch.cat(boxes).double().tolist():
        level = math.floor(canonical_level + math.log2(math.sqrt((x2 - x1) * (y2 - y1)) / canonical_scale) + 1e-6)
        levels.append(min(max(level, k_min), k_max) - k_min)
    return torch.tensor(levels, dtype=torch.int64)


def _pyramid(dtype=torch.float64, seed=0):
    """Features of strides 4, 8, 16 (and an unused one) for 2 images of at most 64 x 80."""
    torch.manual_seed(seed)
    x = OrderedDict()
    x["p2"] = torch.randn(2, 3, 16, 20, dtype=dtype)
    x["p3"] = torch.randn(2, 3, 8, 10, dtype=dtype)
    x["unused"] = torch.randn(2, 3, 5, 5, dtype=dtype)
    x["p4"] = torch.randn(2, 3, 4, 5, dtype=dtype)
    return x


def _fpn_boxes(dtype=torch.float64, seed=0):
    """Boxes with sqrt(area) 28, 56, 112, 224, 56 (on the level boundaries), then random ones."""
    g = torch.Generator().manual_seed(seed)
    exact = torch.tensor([[0, 0, 28, 28], [3, 2, 59, 58], [1, 1, 113, 113], [0, 0, 224, 224], [0, 0, 64, 49]])
    xy = torch.rand(12, 2, generator=g) * 40
    wh = torch.rand(12, 2, generator=g) * 300 + 1
    rand = torch.cat([xy, xy + wh], 1)
    return [exact.to(dtype), rand.to(dtype)]


def _msroi_ref(x, boxes, names, output_size, sampling_ratio, scales, k_min, k_max):
    maps = [v for k, v in x.items() if k in names]
    levels = _level_ref(boxes, k_min, k_max)
    rois = torch.cat([torch.cat([torch.full((len(b), 1), float(i)), b.double()], 1) for i, b in enumerate(boxes)])
    out = []
    for r, level in zip(rois, levels.tolist()):
        if level >= len(maps):  # a level between the maps given (as torchvision: zeros)
            out.append(torch.zeros(maps[0].shape[1], *output_size, dtype=torch.float64))
            continue
        out.append(roi_align_ref(maps[level], r[None], output_size, scales[level], sampling_ratio, "avg", False)[0])
    return torch.stack(out)


def test_multiscale_levels_and_scales():
    x, boxes = _pyramid(), _fpn_boxes()
    pooler = tv.MultiScaleRoIAlign(["p2", "p3", "p4"], 2, 2)
    pooler(x, boxes, [(64, 80), (60, 70)])
    assert pooler.scales == [0.25, 0.125, 0.0625]
    assert (pooler.map_levels.k_min, pooler.map_levels.k_max) == (2, 4)
    levels = pooler.map_levels(boxes)
    torch.testing.assert_close(levels, _level_ref(boxes, 2, 4), rtol=0, atol=0)
    assert levels[:5].tolist() == [0, 0, 1, 2, 0]  # sqrt(area) 28 -> p2 (clamped), 56 -> p2, 112 -> p3, 224 -> p4


@pytest.mark.parametrize("names", [["p2", "p3", "p4"], ["p4", "p2"], ["p3"]])
def test_multiscale_matches_reference(names):
    x, boxes = _pyramid(), _fpn_boxes()
    pooler = tv.MultiScaleRoIAlign(names, (3, 2), 2)
    out = pooler(x, boxes, [(64, 80)])
    k_min = int(-math.log2(pooler.scales[0]))
    k_max = int(-math.log2(pooler.scales[-1]))
    expected = _msroi_ref(x, boxes, names, (3, 2), 2, pooler.scales, k_min, k_max)
    torch.testing.assert_close(out, expected, **TOL[torch.float64])


@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
@pytest.mark.parametrize("names", [["p2", "p3", "p4"], ["p4", "p3"]])
def test_multiscale_equals_torchvision(names, sampling_ratio, dtype):
    from torchvision.ops import MultiScaleRoIAlign
    from torchvision.ops.poolers import LevelMapper

    x, boxes = _pyramid(dtype, seed=1), _fpn_boxes(dtype, seed=1)
    ours = tv.MultiScaleRoIAlign(names, 4, sampling_ratio, canonical_scale=112, canonical_level=3)
    theirs = MultiScaleRoIAlign(names, 4, sampling_ratio, canonical_scale=112, canonical_level=3)
    shapes = [(64, 80), (61, 77)]
    got = _fwd_bwd(lambda z, b: ours({**x, "p3": z}, b, shapes), x["p3"], boxes)
    exp = _fwd_bwd(lambda z, b: theirs({**x, "p3": z}, b, shapes), x["p3"], boxes)
    for g, e in zip(got, exp):
        torch.testing.assert_close(g, e, **TOL[dtype])
    assert ours.scales == theirs.scales
    mapper = LevelMapper(theirs.map_levels.k_min, theirs.map_levels.k_max, 112, 3)
    torch.testing.assert_close(ours.map_levels(boxes), mapper(boxes), rtol=0, atol=0)


def test_multiscale_empty_boxes_gradcheck_and_script():
    x, boxes = _pyramid(), _fpn_boxes()
    pooler = tv.MultiScaleRoIAlign(["p2", "p3", "p4"], 2, 2)
    empty = [b[:0] for b in boxes]
    assert pooler(x, empty, [(64, 80)]).shape == (0, 3, 2, 2)
    scripted = torch.jit.script(tv.MultiScaleRoIAlign(["p2", "p3", "p4"], 2, 2))
    torch.testing.assert_close(scripted(x, boxes, [(64, 80)]), pooler(x, boxes, [(64, 80)]), rtol=0, atol=0)
    p3 = x["p3"].clone().requires_grad_(True)
    gradcheck(lambda z: pooler({**x, "p3": z}, boxes, [(64, 80)]), (p3,), atol=1e-6)


def test_compile_multiscale():
    x, boxes = _pyramid(torch.float32), _fpn_boxes(torch.float32)
    expected = tv.MultiScaleRoIAlign(["p2", "p3", "p4"], 2, 2)(x, boxes, [(64, 80)])
    compiled = torch.compile(tv.MultiScaleRoIAlign(["p2", "p3", "p4"], 2, 2))
    torch.testing.assert_close(compiled(x, boxes, [(64, 80)]), expected)
    torch.testing.assert_close(compiled(x, boxes, [(64, 80)]), expected)  # scales kept


def test_multiscale_needs_image_shapes():
    with pytest.raises(ValueError, match="image_shapes"):
        tv.MultiScaleRoIAlign(["p2"], 2, 2)(_pyramid(), _fpn_boxes(), [])


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@requires_torchvision
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
def test_cuda_equals_torchvision(sampling_ratio, aligned):
    from torchvision import ops

    x, rois = _inputs(torch.float32, seed=11, num_rois=40)
    x, rois = x.cuda(), rois.cuda()
    for boxes in _boxes_variants(rois):
        got = _fwd_bwd(lambda z, b: tv.roi_align(z, b, 3, 0.5, sampling_ratio, aligned), x, boxes)
        exp = _fwd_bwd(lambda z, b: ops.roi_align(z, b, 3, 0.5, sampling_ratio, aligned), x, boxes)
        for g, e in zip(got, exp):
            torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)
        got = _fwd_bwd(lambda z, b: tv.roi_pool(z, b, 3, 0.5), x, boxes)
        exp = _fwd_bwd(lambda z, b: ops.roi_pool(z, b, 3, 0.5), x, boxes)
        for g, e in zip(got, exp):
            torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("rois_dtype", [torch.float32, torch.float16])
def test_cuda_autocast(x_dtype, rois_dtype):
    """torchvision's autocast test: non-contiguous input, output in the input's dtype."""
    torch.manual_seed(0)
    x = torch.rand(2, 50, 10, 10, dtype=x_dtype, device="cuda").permute(0, 1, 3, 2)
    rois = torch.tensor(TV_ROIS, dtype=rois_dtype, device="cuda")
    with torch.autocast("cuda"):
        y = tv.roi_align(x, rois, 5, 1, -1, False)
        z = tv.roi_pool(x, rois, 5, 1)
    assert y.dtype == x.dtype and z.dtype == x.dtype
    xf, rf = x.float().cpu(), rois.float().cpu()
    tol = dict(rtol=4e-3, atol=4e-3)
    torch.testing.assert_close(y.float().cpu(), _align_expected(xf, rf, 5, 1.0, -1, False).float(), **tol)
    torch.testing.assert_close(z.float().cpu(), _pool_expected(xf, rf, 5, 1.0).float(), **tol)


@pytest.mark.cuda
def test_cuda_multiscale_equals_cpu():
    x, boxes = _pyramid(torch.float32), _fpn_boxes(torch.float32)
    pooler = tv.MultiScaleRoIAlign(["p2", "p3", "p4"], 3, -1)
    cpu = pooler(x, boxes, [(64, 80)])
    gpu = tv.MultiScaleRoIAlign(["p2", "p3", "p4"], 3, -1)(
        {k: v.cuda() for k, v in x.items()}, [b.cuda() for b in boxes], [(64, 80)]
    )
    torch.testing.assert_close(gpu.cpu(), cpu, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- the package


def test_boxes_as_tuple_list_or_tensor():
    """torchvision's TestBoxConversionToRoi sequences: a [K, 5] tensor, a list, a tuple."""
    x = torch.rand(2, 3, 120, 120)
    box_tensor = torch.tensor([[0, 0, 0, 100, 100], [1, 0, 0, 100, 100]], dtype=torch.float)
    box_list = [torch.tensor([[0, 0, 100, 100]], dtype=torch.float)] * 2
    for fn in (tv.roi_align, tv.roi_pool):
        expected = fn(x, box_tensor, 3)
        torch.testing.assert_close(fn(x, box_list, 3), expected, rtol=0, atol=0)
        torch.testing.assert_close(fn(x, tuple(box_list), 3), expected, rtol=0, atol=0)


def test_mmops_namespace_keeps_mmcv_conventions():
    import inspect

    import mmops

    assert mmops.tv is tv and "tv" not in mmops.__all__
    assert mmops.roi_align is not tv.roi_align and mmops.RoIAlign is not tv.RoIAlign
    assert inspect.signature(mmops.roi_align).parameters["aligned"].default is True  # mmcv's default
    assert inspect.signature(tv.roi_align).parameters["aligned"].default is False  # torchvision's
    boxes, scores = torch.tensor([[0.0, 0, 1, 1]]), torch.tensor([0.5])
    assert isinstance(mmops.nms(boxes, scores, 0.5), tuple)  # mmcv's (dets, inds)
    assert isinstance(tv.nms(boxes, scores, 0.5), torch.Tensor)


@pytest.mark.parametrize("output_size", [7, (7, 7), [7, 7]])
def test_scripted_modules_save_and_load(output_size, tmp_path):
    x = torch.rand(2, 3, 16, 20)
    rois = torch.tensor([[0, 1.0, 1, 30, 40], [1, 2, 3, 50, 60]])
    boxes = [rois[:1, 1:], rois[1:, 1:]]
    pyramid = OrderedDict(p2=x, p3=torch.rand(2, 3, 8, 10))
    cases = [
        (tv.RoIAlign(output_size, 0.25, 2), (x, rois)),
        (tv.RoIPool(output_size, 0.25), (x, boxes)),
        (tv.MultiScaleRoIAlign(["p2", "p3"], output_size, 2), (pyramid, boxes, [(64, 80)])),
    ]
    for i, (module, args) in enumerate(cases):
        path = str(tmp_path / f"m{i}.pt")
        torch.jit.script(module).save(path)
        torch.testing.assert_close(torch.jit.load(path)(*args), module(*args), rtol=0, atol=0)


def test_export_roi_head_dynamic_rois():
    class Head(torch.nn.Module):
        def forward(self, x, rois):
            return tv.roi_align(x, rois, 2, 0.5, -1, True) + tv.roi_pool(x, rois, 2, 0.5)

    x, rois = _inputs(torch.float32, seed=4)
    program = torch.export.export(Head(), (x, rois), dynamic_shapes=({}, {0: torch.export.Dim("K")}))
    for k in (12, 3):
        torch.testing.assert_close(program.module()(x, rois[:k]), Head()(x, rois[:k]))


@pytest.mark.slow
@requires_torchvision
def test_faster_rcnn_with_tv_pooler_equals_torchvision():
    """The switch in a real model: torchvision's Faster R-CNN (random weights, small images) with
    its MultiScaleRoIAlign replaced by mmops.tv's gives the same detections, eager and scripted."""
    from torchvision.models.detection import fasterrcnn_resnet50_fpn

    torch.manual_seed(0)
    model = fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, min_size=128, max_size=160).eval()
    model.roi_heads.score_thresh = 0.0  # random weights: keep low-score detections to compare
    model.roi_heads.detections_per_img = 30
    images = [torch.rand(3, 240, 300), torch.rand(3, 200, 260)]
    with torch.no_grad():
        expected = model(images)
        model.roi_heads.box_roi_pool = tv.MultiScaleRoIAlign(["0", "1", "2", "3"], 7, 2)
        eager = model(images)
        scripted = torch.jit.script(model)(images)[1]
    for got in (eager, scripted):
        for g, e in zip(got, expected):
            assert g.keys() == e.keys() and len(e["boxes"]) == 30
            for key in e:
                torch.testing.assert_close(g[key], e[key], rtol=1e-5, atol=1e-5)
