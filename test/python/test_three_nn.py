"""mmops.three_nn: the conformance case, mmcv's published vectors, the float64
brute-force reference, ties, M < 3, NaN coordinates, the mmcv.ops bridge and the
CUDA-specific test (skipped without a GPU)."""

import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from neighbors_reference import three_nn_ref
from test_ball_query import random_points

import mmops

op = torch.ops.mmops.three_nn
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _sample(device, dtype, size):
    b, n, m = (2, 11, 17) if size == 0 else (3, 6, 9)
    return Sample((random_points(b, n, dtype=dtype, seed=size, device=device),
                   random_points(b, m, dtype=dtype, seed=30 + size, device=device)))  # fmt: skip


def _empty(device, dtype):
    p = lambda *s: random_points(*s, dtype=dtype, device=device)  # noqa: E731
    return [
        Sample((p(2, 0), p(2, 5)), out_shapes=[(2, 0, 3), (2, 0, 3)]),
        Sample((p(0, 4), p(0, 5)), out_shapes=[(0, 4, 3), (0, 4, 3)]),
        Sample((p(2, 4), p(2, 0)), out_shapes=[(2, 4, 3), (2, 4, 3)]),
    ]


def _cuda_samples(dtype):
    for b, n, m in ((1, 1, 1), (2, 3000, 700), (3, 257, 2), (1, 100, 1000)):
        yield Sample((random_points(b, n, dtype=dtype, seed=n), random_points(b, m, dtype=dtype, seed=m)))


def _tolerance(dtype, what, expected, sample):
    # indices exactly; distances: the same float sqrt on both devices, then rounded
    return dict(rtol=0, atol=0) if what == "output 1" else dict(rtol=1e-6 if dtype == torch.float32 else 0, atol=0)


class _FeaturePropagation(torch.nn.Module):
    """three_nn as PointNet++'s feature propagation uses it: inverse-distance weights."""

    def forward(self, target: torch.Tensor, source: torch.Tensor):
        dist, idx = mmops.three_nn(target, source)
        recip = 1.0 / (dist + 1e-8)
        return idx, recip / recip.sum(2, keepdim=True), op(target * 2.0, source)[1]


_Z = lambda *s, dtype=torch.float64: torch.zeros(*s, dtype=dtype)  # noqa: E731
CONFORMANCE = [
    ConformanceCase(
        "three_nn",
        op,
        _sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        empty=_empty,
        module=_FeaturePropagation,
        cuda_samples=_cuda_samples,
        cuda_tol=_tolerance,
        bad_inputs={
            "target_2d": BadInput(lambda t, s: (t[0], s), r"target to be a 3-D tensor of shape \[B, N, 3\]"),
            "source_4_cols": BadInput(
                lambda t, s: (t, _Z(2, 17, 4)), r"source to be a 3-D tensor of shape \[B, M, 3\]", meta=True
            ),
            "int_target": BadInput(lambda t, s: (t.int(), s.int()), "floating point dtype, but got Int"),
            "dtypes_differ": BadInput(lambda t, s: (t, s.float()), r"source to have the dtype of target \(Double\)"),
            "batches_differ": BadInput(lambda t, s: (t, s[:1]), r"source to have the batch size of target \(2\)"),
            "source_on_cuda": BadInput(lambda t, s: (t, s.cuda()), "source on the device of target", cuda=True),
        },
    )
]


class TestThreeNNConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


def test_mmcv_vectors():
    # mmcv tests/test_ops/test_three_nn.py
    known = torch.tensor([[[-1.8373, 3.5605, -0.7867], [0.7615, 2.9420, 0.2314], [-0.6503, 3.6637, -1.0622],
                           [-1.8373, 3.5605, -0.7867], [-1.8373, 3.5605, -0.7867]],
                          [[-1.3399, 1.9991, -0.3698], [-0.0799, 0.9698, -0.8457], [0.0858, 2.4721, -0.1928],
                           [-1.3399, 1.9991, -0.3698], [-1.3399, 1.9991, -0.3698]]])  # fmt: skip
    unknown = torch.tensor([[[-1.8373, 3.5605, -0.7867], [0.7615, 2.9420, 0.2314], [-0.6503, 3.6637, -1.0622],
                             [-1.5237, 2.3976, -0.8097], [-0.0722, 3.4017, -0.2880], [0.5198, 3.0661, -0.4605],
                             [-2.0185, 3.5019, -0.3236], [0.5098, 3.1020, 0.5799], [-1.6137, 3.8443, -0.5269],
                             [0.7341, 2.9626, -0.3189]],
                            [[-1.3399, 1.9991, -0.3698], [-0.0799, 0.9698, -0.8457], [0.0858, 2.4721, -0.1928],
                             [-0.9022, 1.6560, -1.3090], [0.1156, 1.6901, -0.4366], [-0.6477, 2.3576, -0.1563],
                             [-0.8482, 1.1466, -1.2704], [-0.8753, 2.0845, -0.3460], [-0.5621, 1.4233, -1.2858],
                             [-0.5883, 1.3114, -1.2899]]])  # fmt: skip
    dist, idx = mmops.three_nn(unknown, known)
    expected_dist = torch.tensor([[[0.0000, 0.0000, 0.0000], [0.0000, 2.0463, 2.8588], [0.0000, 1.2229, 1.2229],
                                   [1.2047, 1.2047, 1.2047], [1.0011, 1.0845, 1.8411], [0.7433, 1.4451, 2.4304],
                                   [0.5007, 0.5007, 0.5007], [0.4587, 2.0875, 2.7544], [0.4450, 0.4450, 0.4450],
                                   [0.5514, 1.7206, 2.6811]],
                                  [[0.0000, 0.0000, 0.0000], [0.0000, 1.6464, 1.6952], [0.0000, 1.5125, 1.5125],
                                   [1.0915, 1.0915, 1.0915], [0.8197, 0.8511, 1.4894], [0.7433, 0.8082, 0.8082],
                                   [0.8955, 1.3340, 1.3340], [0.4730, 0.4730, 0.4730], [0.7949, 1.3325, 1.3325],
                                   [0.7566, 1.3727, 1.3727]]])  # fmt: skip
    expected_idx = torch.tensor([[[0, 3, 4], [1, 2, 0], [2, 0, 3], [0, 3, 4], [2, 1, 0], [1, 2, 0], [0, 3, 4],
                                  [1, 2, 0], [0, 3, 4], [1, 2, 0]],
                                 [[0, 3, 4], [1, 2, 0], [2, 0, 3], [0, 3, 4], [2, 1, 0], [2, 0, 3], [1, 0, 3],
                                  [0, 3, 4], [1, 0, 3], [1, 0, 3]]])  # fmt: skip
    torch.testing.assert_close(dist, expected_dist, rtol=1e-4, atol=1e-8)
    assert torch.equal(idx, expected_idx.int())  # mmcv's ties (equal known points) go to the lower index too


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_against_reference(dtype):
    target = random_points(3, 60, seed=1, dtype=dtype)
    source = random_points(3, 40, seed=2, dtype=dtype)
    dist, idx = op(target, source)
    ref_dist, ref_idx = three_nn_ref(target, source)
    assert dist.dtype == dtype and idx.dtype == torch.int32
    assert torch.equal(idx, ref_idx)
    # torch's vectorised float64 sqrt is within an ulp, not always correctly rounded
    tol = dict(rtol=4e-16, atol=0) if dtype == torch.float64 else dict(rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(dist.double(), ref_dist, **tol)


def test_ties_and_fewer_than_three_sources():
    source = torch.tensor([[[0.0, 2, 0], [2.0, 0, 0], [0, 0, 2.0], [1.0, 0, 0]]])
    dist, idx = op(torch.zeros(1, 1, 3), source)
    assert idx[0, 0].tolist() == [3, 0, 1] and dist[0, 0].tolist() == [1.0, 2.0, 2.0]
    dist, idx = op(torch.zeros(1, 2, 3), source[:, 1:2])
    assert idx[0].tolist() == [[0, 0, 0]] * 2 and dist[0, 0].tolist() == [2.0, math.inf, math.inf]


def test_nan_sources_rank_last():
    source = torch.tensor([[[float("nan"), 0, 0], [3.0, 0, 0], [1.0, 0, 0], [2.0, 0, 0]]])
    dist, idx = op(torch.zeros(1, 1, 3), source)
    assert idx[0, 0].tolist() == [2, 3, 1]
    dist, idx = op(torch.zeros(1, 1, 3), source[:, :2])
    assert idx[0, 0].tolist() == [1, 0, 0] and dist[0, 0, 1].isnan() and dist[0, 0, 2] == math.inf


def test_no_gradient():
    target = random_points(1, 5, seed=3).requires_grad_(True)
    dist, idx = op(target, random_points(1, 6, seed=4))
    assert not dist.requires_grad and not idx.requires_grad


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    target, source = (
        random_points(2, 30, dtype=torch.float32, seed=5),
        random_points(2, 12, dtype=torch.float32, seed=6),
    )
    dist, idx = mmcv_ops.three_nn(target, source)
    ref_dist, ref_idx = op(target, source)
    assert torch.equal(idx, ref_idx) and torch.equal(dist, ref_dist)


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_large(dtype):
    target = random_points(4, 4096, seed=7).to(dtype)
    source = random_points(4, 1024, seed=8).to(dtype)
    dist, idx = op(target.cuda(), source.cuda())
    ref_dist, ref_idx = op(target, source)
    assert torch.equal(idx.cpu(), ref_idx)
    torch.testing.assert_close(dist.cpu(), ref_dist, rtol=1e-6 if dtype == torch.float32 else 0, atol=0)
