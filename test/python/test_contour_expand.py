"""mmops contour_expand: the conformance cases, mmcv's published vector, the
plain-queue reference (test/python/text_grouping_reference.py) in both modes, the
layered flood of the CUDA kernel emulated against the queue, ties, empty maps,
bad labels and CUDA == CPU (skipped without a GPU)."""

import random

import numpy as np
import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import strict_index_check
from text_grouping_reference import contour_expand_layered, contour_expand_ref, synthetic_psenet

import mmops

expand_op = torch.ops.mmops.contour_expand


def random_maps(height, width, kernels, labels, seed, density=0.15, fill=0.7):
    """Random kernel masks and a sparse random label map (labels 1..labels)."""
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(kernels, height, width, generator=g) < fill).to(torch.uint8)
    label = torch.randint(1, labels + 1, (height, width), generator=g, dtype=torch.int32)
    label[torch.rand(height, width, generator=g) >= density] = 0
    return mask, label


# ----------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    mask, label, _ = synthetic_psenet(24 + 5 * size, 30 - 3 * size, 4, 3, seed=size)
    return Sample((mask.to(device), label.to(device), 2, 8, True))  # sizes 0 and 1: same options


def _empty(device, dtype):
    u8, i32 = dict(dtype=torch.uint8, device=device), dict(dtype=torch.int32, device=device)
    return [
        Sample((torch.zeros(3, 0, 5, **u8), torch.zeros(0, 5, **i32), 1, 4, False), out_shapes=[(0, 5)]),
        Sample((torch.zeros(2, 4, 0, **u8), torch.zeros(4, 0, **i32), 1, 4, True), out_shapes=[(4, 0)]),
        Sample((torch.zeros(0, 4, 5, **u8), torch.ones(4, 5, **i32), 1, 4, True), out_shapes=[(4, 5)]),
    ]


def _cuda_samples(dtype):
    for seed, (h, w, k, n) in enumerate([(1, 1, 2, 1), (7, 300, 3, 5), (64, 64, 7, 20), (160, 160, 7, 30)]):
        mask, label, _ = synthetic_psenet(h, w, n, k, seed=seed)
        for progressive in (False, True):
            yield Sample((mask, label, 3, n, progressive))
        m, lab = random_maps(h, w, k, 9, seed)
        yield Sample((m, lab, 2, 9, True))
        yield Sample((m.bool(), lab, 1, 9, False))


class _Expand(torch.nn.Module):
    def forward(self, kernel_mask: torch.Tensor, internal_kernel_label: torch.Tensor):
        return torch.ops.mmops.contour_expand(kernel_mask, internal_kernel_label, 2, 8, False)


def _with(position, value):
    def make(*args):
        args = list(args)
        args[position] = value(args[position]) if callable(value) else value
        return tuple(args)

    return make


CONFORMANCE = [
    ConformanceCase(
        "contour_expand",
        expand_op,
        _sample,
        dtypes=(torch.float32,),  # no floating argument: one CUDA == CPU run
        empty=_empty,
        module=_Expand,
        cuda_samples=_cuda_samples,
        bad_inputs={
            "mask_2d": BadInput(
                _with(0, lambda m: m[0]), r"expected kernel_mask to be a 3-D tensor \[K, H, W\]", meta=True
            ),
            "mask_float": BadInput(
                _with(0, lambda m: m.float()),
                "expected kernel_mask to have dtype uint8 or bool, but got Float",
                meta=True,
            ),
            "label_long": BadInput(
                _with(1, lambda t: t.long()),
                "expected internal_kernel_label to have dtype int32, but got Long",
                meta=True,
            ),
            "label_shape": BadInput(
                _with(1, lambda t: t[1:]), r"expected internal_kernel_label of shape \[24, 30\]", meta=True
            ),
            "kernel_num_negative": BadInput(
                _with(3, -1), r"expected kernel_num in \[0, 2\^31 - 2\], but got -1", meta=True
            ),
            "label_above_kernel_num": BadInput(
                _with(3, 3), r"expected every value of internal_kernel_label in \[0, kernel_num\] = \[0, 3\], but got "
            ),
            "label_negative": BadInput(
                _with(1, lambda t: torch.where(t == 1, -2, t).to(torch.int32)),
                r"internal_kernel_label in \[0, kernel_num\] = \[0, 8\], but got values in \[-2, ",
            ),
            "too_many_pixels": BadInput(
                lambda *a: (
                    torch.zeros(1, 1, 1, dtype=torch.uint8).expand(1, 65536, 32769),
                    torch.zeros(1, 1, dtype=torch.int32).expand(65536, 32769),
                    1,
                    1,
                    False,
                ),
                r"expected at most 2\^31 - 1 pixels \(H \* W\), but got H = 65536, W = 32769",
                meta=True,
            ),
            "device_mismatch": BadInput(
                lambda m, lab, *rest: (m, lab.cuda(), *rest),
                "expected internal_kernel_label on the device of kernel_mask",
                cuda=True,
            ),
        },
    ),
]


class TestContourExpandConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- known vectors

# mmcv tests/test_ops/test_contour_expand.py
MMCV_LABEL = np.zeros((10, 10), np.int32)
MMCV_LABEL[3:7, 2:4] = 1
MMCV_LABEL[3:7, 8] = 2
MMCV_MASK1 = np.zeros((10, 10), np.uint8)
MMCV_MASK1[3:7, 2:9] = 1
MMCV_GT = np.zeros((10, 10), np.int64)
MMCV_GT[3:7, 2:6] = 1
MMCV_GT[3:7, 6:9] = 2


@pytest.mark.parametrize("progressive", [False, True])
def test_mmcv_vector(progressive):
    mask = np.stack([MMCV_MASK1, (MMCV_LABEL > 0).astype(np.uint8)])
    out = mmops.contour_expand(mask, MMCV_LABEL, 1, 3, progressive)
    assert out.dtype == torch.int32 and out.tolist() == MMCV_GT.tolist()
    out = mmops.contour_expand(torch.from_numpy(mask), torch.from_numpy(MMCV_LABEL), 1, 3, progressive)
    assert out.tolist() == MMCV_GT.tolist()
    # column 5 is 2 pixels from label 1 and 3 from label 2; column 6 the other way round
    assert out.tolist() == contour_expand_ref(mask, MMCV_LABEL, 1, 3, progressive)


def test_min_area_drops_labels():
    mask = np.stack([MMCV_MASK1, (MMCV_LABEL > 0).astype(np.uint8)])
    # label 2 has 4 pixels, label 1 has 8: with min area 5 only label 1 grows, over label 2 too
    out = mmops.contour_expand(mask, MMCV_LABEL, 5, 3)
    expected = np.zeros((10, 10), np.int64)
    expected[3:7, 2:9] = 1
    assert out.tolist() == expected.tolist()
    assert mmops.contour_expand(mask, MMCV_LABEL, 9, 3).sum() == 0


# ----------------------------------------------------------------------------- mmcv vs progressive


def test_modes_differ():
    # one row; kernel 0 everywhere, kernel 1 at columns 1, 4, 5; label 2 at column 0, 1 at 4.
    # mmcv floods kernel 0 at once: column 2 is 2 pixels from both, the first queued (2) wins;
    # column 3 is next to label 1.
    mask = torch.zeros(3, 1, 6, dtype=torch.uint8)
    mask[0] = 1
    mask[1, 0] = torch.tensor([0, 1, 0, 0, 1, 1])
    label = torch.tensor([[2, 0, 0, 0, 1, 0]], dtype=torch.int32)
    assert expand_op(mask, label, 1, 2).tolist() == [[2, 2, 2, 1, 1, 1]]
    # PSENet: round 1 (kernel 1) claims columns 1 (from 0) and 5 (from 4); its edges are
    # 1 and 5 only (0 and 4 claimed something). Round 2 (kernel 0) from 1 and 5: 1 takes
    # 2, then 2 takes 3 -- column 4's label never grows again.
    prog = expand_op(mask, label, 1, 2, True)
    assert prog.tolist() == [[2, 2, 2, 2, 1, 1]]
    assert prog.tolist() == contour_expand_ref(mask, label, 1, 2, True)


def test_progressive_uses_each_kernel():
    # kernel 1 blocks the way to the left; mmcv ignores it (kernel 0 only)
    mask = torch.zeros(3, 1, 6, dtype=torch.uint8)
    mask[0, 0, :] = 1
    mask[1, 0, 3:] = 1
    label = torch.tensor([[0, 0, 0, 0, 1, 0]], dtype=torch.int32)
    assert expand_op(mask, label, 1, 1).tolist() == [[1, 1, 1, 1, 1, 1]]
    assert expand_op(mask, label, 1, 1, True).tolist() == [[1, 1, 1, 1, 1, 1]]
    # without kernel 0 the progressive result stops at kernel 1's border
    mask[0, 0, :3] = 0
    assert expand_op(mask, label, 1, 1, True).tolist() == [[0, 0, 0, 1, 1, 1]]
    # one kernel: no round at all
    assert expand_op(mask[:1], label, 1, 1).tolist() == label.tolist()
    assert expand_op(mask[:1], label, 1, 1, True).tolist() == label.tolist()


# ----------------------------------------------------------------------------- random vs reference


@pytest.mark.parametrize("progressive", [False, True])
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 1, 17), (4, 13, 1), (2, 9, 11), (7, 20, 23)])
def test_random_against_reference(shape, progressive):
    k, h, w = shape
    for seed in range(4):
        mask, label = random_maps(h, w, k, 6, seed)
        for min_area in (0, 2, 4):
            expected = contour_expand_ref(mask, label, min_area, 6, progressive)
            assert expand_op(mask, label, min_area, 6, progressive).tolist() == expected, (seed, min_area)
            assert expand_op(mask.bool(), label, min_area, 6, progressive).tolist() == expected


@pytest.mark.parametrize("progressive", [False, True])
def test_synthetic_against_reference(progressive):
    mask, label, n = synthetic_psenet(60, 80, 8, 7, seed=3)
    expected = contour_expand_ref(mask, label, 5, n, progressive)
    out = expand_op(mask, label, 5, n, progressive)
    assert out.tolist() == expected
    assert (out > 0).sum() > (label > 0).sum()  # something grew


@pytest.mark.parametrize("progressive", [False, True])
def test_layered_flood_equals_queue(progressive):
    """The CUDA kernel's layer-by-layer flood (emulated) gives the queue's result:
    random maps with many ties (two labels reaching a pixel in the same layer)."""
    rng = random.Random(7)
    for trial in range(150):
        k, h, w = rng.randint(1, 5), rng.randint(1, 12), rng.randint(1, 12)
        mask, label = random_maps(h, w, k, 5, trial, density=rng.choice([0.05, 0.2, 0.5]), fill=rng.random())
        assert contour_expand_layered(mask, label, 2, 5, progressive) == contour_expand_ref(
            mask, label, 2, 5, progressive
        ), trial


def test_strided_inputs():
    mask, label = random_maps(12, 15, 4, 6, 1)
    wide_mask = torch.zeros(4, 12, 30, dtype=torch.uint8)
    wide_mask[:, :, ::2] = mask
    t_label = label.t().contiguous().t()
    for progressive in (False, True):
        expected = expand_op(mask, label, 1, 6, progressive)
        assert torch.equal(expand_op(wide_mask[:, :, ::2], t_label, 1, 6, progressive), expected)


def test_kernel_num_bounds_labels_only():
    mask, label = random_maps(6, 7, 3, 4, 2)
    # a larger kernel_num changes nothing; labels are checked against it
    assert torch.equal(expand_op(mask, label, 1, 4), expand_op(mask, label, 1, 2**31 - 2))
    with pytest.raises(RuntimeError, match=r"in \[0, kernel_num\] = \[0, 3\], but got values in \[0, 4\]"):
        expand_op(mask, label, 1, 3)
    with pytest.raises(RuntimeError, match=r"mmops::contour_expand: expected kernel_num in \[0, 2\^31 - 2\]"):
        expand_op(mask, label, 1, 2**31 - 1)


def test_not_differentiable():
    mask, label = random_maps(5, 5, 2, 3, 0)
    out = expand_op(mask, label, 1, 3)
    assert not out.requires_grad and out.dtype == torch.int32


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("progressive", [False, True])
def test_cuda_matches_cpu_large(progressive):
    for seed, (h, w) in enumerate([(160, 160), (640, 640), (3, 5000)]):
        mask, label, n = synthetic_psenet(h, w, 40, 7, seed=seed)
        cpu = expand_op(mask, label, 10, n, progressive)
        assert torch.equal(expand_op(mask.cuda(), label.cuda(), 10, n, progressive).cpu(), cpu)
    # a snake: thousands of layers
    mask = torch.zeros(2, 101, 101, dtype=torch.uint8)
    mask[0, ::2, :] = 1
    mask[0, 1::4, -1] = 1
    mask[0, 3::4, 0] = 1
    label = torch.zeros(101, 101, dtype=torch.int32)
    label[0, 0] = 1
    cpu = expand_op(mask, label, 1, 1, progressive)
    assert torch.equal(expand_op(mask.cuda(), label.cuda(), 1, 1, progressive).cpu(), cpu)


@pytest.mark.cuda
def test_cuda_guards_bad_labels():
    mask, label = random_maps(20, 20, 3, 6, 4)
    bad = label.clone()
    bad[0, :5] = torch.tensor([-1, 7, 100, -5, 2**31 - 1], dtype=torch.int32)
    # read as 0 on CUDA (no sync); the strict switch raises
    zeroed = torch.where((bad < 0) | (bad > 6), 0, bad).to(torch.int32)
    assert torch.equal(expand_op(mask.cuda(), bad.cuda(), 1, 6).cpu(), expand_op(mask, zeroed, 1, 6))
    with strict_index_check(True):
        with pytest.raises(RuntimeError, match=r"internal_kernel_label in \[0, kernel_num\]"):
            expand_op(mask.cuda(), bad.cuda(), 1, 6)
