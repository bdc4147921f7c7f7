"""mmops pixel_group: the conformance cases, mmcv's published vector (exact float32
values), the plain-queue reference with mmcv's float32 rounding
(test/python/text_grouping_reference.py), the layered flood of the CUDA kernel
emulated against the queue, ties, NaN, empty maps, bad labels and CUDA == CPU
(skipped without a GPU)."""

import random

import numpy as np
import pytest
import torch
from conformance import FLOAT_DTYPES, BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import strict_index_check
from text_grouping_reference import mmcv_pixel_group_lists, pixel_group_layered, pixel_group_ref, synthetic_pan

import mmops

group_op = torch.ops.mmops.pixel_group


def random_inputs(height, width, channels, regions, seed, dtype=torch.float32, levels=None):
    """Random maps; embedding values from `levels` (ties) when given."""
    g = torch.Generator().manual_seed(seed)
    score = torch.rand(height, width, generator=g)
    mask = torch.rand(height, width, generator=g) < 0.8
    if levels is None:
        embedding = torch.rand(height, width, channels, generator=g)
    else:
        pick = torch.randint(0, len(levels), (height, width, channels), generator=g)
        embedding = torch.tensor(levels)[pick]
    label = torch.randint(1, max(2, regions), (height, width), generator=g, dtype=torch.int32)
    label[torch.rand(height, width, generator=g) >= 0.2] = 0
    if regions <= 1:
        label.zero_()
    contour = (torch.rand(height, width, generator=g) < 0.6).to(torch.uint8)
    return score.to(dtype), mask, embedding.to(dtype), label, contour


def as_lists(out):
    labels, scores, counts = out
    return labels.tolist(), scores.tolist(), counts.tolist()


# ----------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    score, mask, emb, label, contour, regions = synthetic_pan(20 + 4 * size, 28 - 3 * size, 4, seed=size, dtype=dtype)
    return Sample(tuple(t.to(device) for t in (score, mask, emb, label, contour)) + (6, 0.8))


def _empty(device, dtype):
    f, i32, b = dict(dtype=dtype, device=device), dict(dtype=torch.int32, device=device), dict(device=device)
    return [
        Sample(
            (
                torch.zeros(0, 5, **f),
                torch.zeros(0, 5, dtype=torch.bool, **b),
                torch.zeros(0, 5, 4, **f),
                torch.zeros(0, 5, **i32),
                torch.zeros(0, 5, dtype=torch.uint8, **b),
                3,
                0.8,
            ),
            out_shapes=[(0, 5), (3,), (3,)],
        ),
        Sample(
            (
                torch.zeros(4, 5, **f),
                torch.ones(4, 5, dtype=torch.bool, **b),
                torch.zeros(4, 5, 0, **f),
                torch.ones(4, 5, **i32),
                torch.ones(4, 5, dtype=torch.uint8, **b),
                2,
                0.8,
            ),
            out_shapes=[(4, 5), (2,), (2,)],
        ),
        Sample(
            (
                torch.zeros(4, 5, **f),
                torch.ones(4, 5, dtype=torch.bool, **b),
                torch.zeros(4, 5, 2, **f),
                torch.zeros(4, 5, **i32),
                torch.ones(4, 5, dtype=torch.uint8, **b),
                0,
                0.8,
            ),
            out_shapes=[(4, 5), (0,), (0,)],
        ),
    ]


def _cuda_samples(dtype):
    for seed, (h, w, n, c) in enumerate([(1, 1, 1, 4), (7, 300, 5, 4), (64, 64, 12, 4), (160, 160, 30, 8)]):
        yield Sample(synthetic_pan(h, w, n, channels=c, seed=seed, dtype=dtype)[:5] + (n + 1, 0.8))
        yield Sample(random_inputs(h, w, c, 6, seed, dtype, levels=[0.0, 0.25, 0.5]) + (6, 0.3))


class _Group(torch.nn.Module):
    def forward(
        self,
        score: torch.Tensor,
        mask: torch.Tensor,
        embedding: torch.Tensor,
        label: torch.Tensor,
        contour: torch.Tensor,
    ):
        return torch.ops.mmops.pixel_group(score, mask, embedding, label, contour, 6, 0.8)


def _with(position, value):
    def make(*args):
        args = list(args)
        args[position] = value(args[position]) if callable(value) else value
        return tuple(args)

    return make


CONFORMANCE = [
    ConformanceCase(
        "pixel_group",
        group_op,
        _sample,
        dtypes=FLOAT_DTYPES,
        empty=_empty,
        module=_Group,
        cuda_samples=_cuda_samples,
        cuda_tol=lambda dtype, what, expected, sample: dict(rtol=0.0, atol=0.0),  # the same sums in the same order
        bad_inputs={
            "score_1d": BadInput(_with(0, lambda t: t[0]), r"expected score to be a 2-D tensor \[H, W\]", meta=True),
            "score_int": BadInput(
                _with(0, lambda t: t.int()), "expected score to have a floating point dtype, but got Int", meta=True
            ),
            "mask_float": BadInput(
                _with(1, lambda t: t.float()), "expected mask to have dtype bool or uint8, but got Float", meta=True
            ),
            "mask_shape": BadInput(_with(1, lambda t: t[1:]), r"expected mask of shape \[20, 28\]", meta=True),
            "embedding_2d": BadInput(
                _with(2, lambda t: t[..., 0]), r"expected embedding to be a 3-D tensor \[H, W, C\]", meta=True
            ),
            "embedding_dtype": BadInput(
                _with(2, lambda t: t.double()),
                r"expected embedding to have score's dtype \(Float\), but got Double",
                meta=True,
            ),
            "label_long": BadInput(
                _with(3, lambda t: t.long()), "expected kernel_label to have dtype int32, but got Long", meta=True
            ),
            "contour_shape": BadInput(
                _with(4, lambda t: t[:, 1:]), r"expected kernel_contour of shape \[20, 28\]", meta=True
            ),
            "regions_negative": BadInput(
                _with(5, -1), r"expected kernel_region_num in \[0, 2\^31 - 1\], but got -1", meta=True
            ),
            "threshold_nan": BadInput(_with(6, float("nan")), "distance_threshold must be a number, but got nan"),
            "label_too_large": BadInput(
                _with(5, 3), r"expected every value of kernel_label in \[0, kernel_region_num\) = \[0, 3\)"
            ),
            "label_negative": BadInput(
                _with(3, lambda t: torch.where(t == 1, -1, t).to(torch.int32)), r"but got values in \[-1, "
            ),
            "device_mismatch": BadInput(
                lambda s, m, *rest: (s, m.cuda(), *rest), "expected mask on the device of score", cuda=True
            ),
        },
    ),
]


class TestPixelGroupConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- known vectors


def mmcv_inputs():
    """mmcv tests/test_ops/test_pixel_group.py."""
    score = np.zeros((10, 10), np.float32)
    score[3:7, 1:9] = 0.9
    mask = score > 0.5
    embedding = np.zeros((10, 10, 8), np.float32)
    embedding[:, :7] = 0.9
    embedding[:, 7:] = 10.0
    label = np.zeros((10, 10), np.int32)
    label[3:7, 2:5] = 1
    label[3:7, 8] = 2
    contour = np.zeros((10, 10), np.uint8)
    contour[3:7, 2] = contour[3:7, 4] = contour[3, 2:5] = contour[6, 2:5] = contour[3:7, 8] = 1
    return score, mask, embedding, label, contour


MMCV_GT1 = [0.8999997973442078, 24.0] + [float(v) for y in range(3, 7) for x in range(1, 7) for v in (x, y)]
MMCV_GT2 = [0.9000000357627869, 8.0] + [float(v) for y in range(3, 7) for x in (7, 8) for v in (x, y)]


def test_mmcv_vector():
    inputs = mmcv_inputs()
    for args in (inputs, [torch.from_numpy(a) for a in inputs]):
        result = mmops.pixel_group(*args, 3, 0.8)
        assert result[0] == [0.0, 0.0]
        assert result[1] == MMCV_GT1  # the float32 mean, bit for bit
        assert result[2] == MMCV_GT2
    labels, scores, counts = group_op(*[torch.from_numpy(a) for a in inputs], 3, 0.8)
    assert labels.dtype == torch.int32 and scores.dtype == torch.float32 and counts.dtype == torch.long
    assert counts.tolist() == [0, 24, 8]
    assert as_lists((labels, scores, counts)) == pixel_group_ref(*inputs, 3, 0.8)


# ----------------------------------------------------------------------------- random vs reference


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 17, 3), (13, 1, 2), (9, 11, 4), (20, 23, 8)])
@pytest.mark.parametrize("levels", [None, [0.0, 0.5, 1.0]])
def test_random_against_reference(shape, levels):
    h, w, c = shape
    for seed in range(4):
        inputs = random_inputs(h, w, c, 6, seed, levels=levels)
        for thr in (0.2, 0.5, 1.0, 3.0):
            assert as_lists(group_op(*inputs, 6, thr)) == pixel_group_ref(*inputs, 6, thr), (seed, thr)


def test_float64_against_reference():
    inputs = random_inputs(15, 16, 4, 5, 3, dtype=torch.float64)
    for thr in (0.3, 0.6):
        assert as_lists(group_op(*inputs, 5, thr)) == pixel_group_ref(*inputs, 5, thr, float32=False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_computes_in_float32(dtype):
    inputs = random_inputs(14, 12, 4, 5, 5, dtype=dtype)
    labels, scores, counts = group_op(*inputs, 5, 0.5)
    f32 = [t.float() if t.is_floating_point() else t for t in inputs]
    ref_labels, ref_scores, ref_counts = group_op(*f32, 5, 0.5)
    assert torch.equal(labels, ref_labels) and torch.equal(counts, ref_counts)
    assert scores.dtype == dtype and torch.equal(scores, ref_scores.to(dtype))


def test_synthetic_against_reference_and_lists():
    inputs = synthetic_pan(48, 64, 8, seed=4)
    regions = inputs[5]
    out = group_op(*inputs[:5], regions, 0.8)
    expected = pixel_group_ref(*inputs[:5], regions, 0.8)
    assert as_lists(out) == expected
    assert mmops.pixel_group(*inputs[:5], regions, 0.8) == mmcv_pixel_group_lists(*expected)
    assert (out[0] > 0).sum() > (inputs[3] > 0).sum()  # kernels grew


def test_layered_flood_equals_queue():
    """The CUDA kernel's layer-by-layer flood (emulated) gives the queue's result, ties
    included (embeddings from 3 levels: kernels equidistant from a pixel)."""
    rng = random.Random(11)
    for trial in range(150):
        h, w, c = rng.randint(1, 12), rng.randint(1, 12), rng.randint(0, 3)
        inputs = random_inputs(h, w, c, 5, trial, levels=[0.0, 0.25, 0.5])
        thr = rng.choice([0.2, 0.4, 0.8])
        assert pixel_group_layered(*inputs, 5, thr) == pixel_group_ref(*inputs, 5, thr), trial


def test_tie_goes_to_first_queued():
    # pixel (0, 2) is next to label 1 at (0, 1) and label 2 at (0, 3), equidistant from
    # both kernel vectors: the first contour pixel queued (raster order: label 1) wins
    score = torch.ones(1, 5)
    mask = torch.ones(1, 5, dtype=torch.bool)
    emb = torch.tensor([[[0.0], [0.0], [0.5], [1.0], [1.0]]])
    label = torch.tensor([[1, 1, 0, 2, 2]], dtype=torch.int32)
    contour = torch.ones(1, 5, dtype=torch.uint8)
    assert group_op(score, mask, emb, label, contour, 3, 0.6)[0].tolist() == [[1, 1, 1, 2, 2]]
    flipped = torch.tensor([[2, 2, 0, 1, 1]], dtype=torch.int32)
    assert group_op(score, mask, emb, flipped, contour, 3, 0.6)[0].tolist() == [[2, 2, 2, 1, 1]]
    # threshold exactly at the distance: not claimed (distance^2 < threshold^2 only)
    assert group_op(score, mask, emb, label, contour, 3, 0.5)[0].tolist() == [[1, 1, 0, 2, 2]]


def test_contour_and_mask_gate_the_flood():
    score = torch.ones(3, 3)
    emb = torch.zeros(3, 3, 2)
    label = torch.zeros(3, 3, dtype=torch.int32)
    label[1, 1] = 1
    mask = torch.ones(3, 3, dtype=torch.bool)
    none = torch.zeros(3, 3, dtype=torch.uint8)
    # a kernel without contour pixels does not grow
    assert group_op(score, mask, emb, label, none, 2, 1.0)[0].tolist() == label.tolist()
    contour = none.clone()
    contour[1, 1] = 1
    assert group_op(score, mask, emb, label, contour, 2, 1.0)[0].tolist() == [[1] * 3] * 3
    mask[0, :] = False
    assert group_op(score, mask, emb, label, contour, 2, 1.0)[0].tolist() == [[0] * 3, [1] * 3, [1] * 3]
    # C == 0: mmcv queues nothing
    grown = group_op(score, mask, emb[..., :0], label, contour, 2, 1.0)
    assert grown[0].tolist() == label.tolist() and grown[2].tolist() == [0, 1]


def test_nan_embedding():
    # mmcv stops summing at the threshold: a NaN after that does not count; a NaN before
    # it makes the sum NaN, which is not >= threshold^2: claimed
    score = torch.ones(1, 3)
    mask = torch.ones(1, 3, dtype=torch.bool)
    label = torch.tensor([[0, 1, 0]], dtype=torch.int32)
    contour = torch.tensor([[0, 1, 0]], dtype=torch.uint8)
    emb = torch.tensor([[[float("nan"), 0.0], [0.0, 0.0], [5.0, float("nan")]]])
    out = group_op(score, mask, emb, label, contour, 2, 1.0)
    assert out[0].tolist() == [[1, 1, 0]]
    assert as_lists(out) == pixel_group_ref(score, mask, emb, label, contour, 2, 1.0)


def test_labels_and_regions():
    inputs = random_inputs(8, 9, 3, 4, 2)
    # more regions than labels: empty ones read [0, 0]
    labels, scores, counts = group_op(*inputs, 10, 0.5)
    assert scores.shape == (10,) and counts[4:].tolist() == [0] * 6 and scores[4:].tolist() == [0.0] * 6
    assert mmops.pixel_group(*inputs, 10, 0.5)[7] == [0.0, 0.0]
    # R = 0 with an all-background map
    zero = list(inputs)
    zero[3] = torch.zeros_like(inputs[3])
    assert mmops.pixel_group(*zero, 0, 0.5) == []
    with pytest.raises(RuntimeError, match=r"mmops::pixel_group: expected every value of kernel_label in \[0, "):
        group_op(*inputs, 2, 0.5)


def test_strided_inputs():
    score, mask, emb, label, contour = random_inputs(12, 10, 4, 5, 6)
    expected = group_op(score, mask, emb, label, contour, 5, 0.5)
    strided = (
        score.t().contiguous().t(),
        mask.t().contiguous().t(),
        emb.permute(2, 0, 1).contiguous().permute(1, 2, 0),
        label.t().contiguous().t(),
        contour.t().contiguous().t(),
    )
    out = group_op(*strided, 5, 0.5)
    assert all(torch.equal(a, b) for a, b in zip(out, expected))


def test_autocast():
    inputs = random_inputs(10, 11, 4, 5, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        labels, scores, _ = group_op(inputs[0].bfloat16(), inputs[1], inputs[2], inputs[3], inputs[4], 5, 0.5)
    assert scores.dtype == torch.bfloat16
    assert torch.equal(labels, group_op(inputs[0].bfloat16().float(), *inputs[1:], 5, 0.5)[0])


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
def test_cuda_matches_cpu_large():
    for seed, (h, w, n) in enumerate([(160, 160, 30), (640, 640, 60), (3, 5000, 20)]):
        inputs = synthetic_pan(h, w, n, seed=seed)
        cpu = group_op(*inputs[:5], inputs[5], 0.8)
        gpu = group_op(*[t.cuda() for t in inputs[:5]], inputs[5], 0.8)
        assert all(torch.equal(a.cpu(), b) for a, b in zip(gpu, cpu))
        assert mmops.pixel_group(*[t.cuda() for t in inputs[:5]], inputs[5], 0.8) == mmops.pixel_group(
            *inputs[:5], inputs[5], 0.8
        )


@pytest.mark.cuda
def test_cuda_guards_bad_labels():
    inputs = list(random_inputs(20, 20, 4, 6, 4))
    bad = inputs[3].clone()
    bad[0, :4] = torch.tensor([-1, 6, 100, -7], dtype=torch.int32)
    zeroed = torch.where((bad < 0) | (bad >= 6), 0, bad).to(torch.int32)
    cuda = [t.cuda() for t in inputs]
    cuda[3] = bad.cuda()
    cpu = group_op(*inputs[:3], zeroed, inputs[4], 6, 0.5)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(group_op(*cuda, 6, 0.5), cpu))
    with strict_index_check(True):
        with pytest.raises(RuntimeError, match=r"kernel_label in \[0, kernel_region_num\)"):
            group_op(*cuda, 6, 0.5)
