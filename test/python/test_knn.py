"""mmops.knn: the conformance case, mmcv's published vectors (against topk), the float64
brute-force reference, ties, k > N, NaN coordinates, the transposed layout, the mmcv.ops
bridge and the CUDA-specific tests (skipped without a GPU)."""

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from neighbors_reference import knn_ref
from test_ball_query import MMCV_CENTERS, MMCV_XYZ, random_points

import mmops

op = torch.ops.mmops.knn
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _sample(device, dtype, size):
    b, n, m = (2, 30, 9) if size == 0 else (3, 21, 5)
    return Sample((4, random_points(b, n, dtype=dtype, seed=size, device=device),
                   random_points(b, m, dtype=dtype, seed=20 + size, device=device), False))  # fmt: skip


def _empty(device, dtype):
    p = lambda *s: random_points(*s, dtype=dtype, device=device)  # noqa: E731
    return [
        Sample((3, p(2, 5), p(2, 0), False), out_shapes=[(2, 3, 0)]),
        Sample((3, p(0, 5), p(0, 4), False), out_shapes=[(0, 3, 4)]),
        Sample((2, p(2, 0), p(2, 3), False), out_shapes=[(2, 2, 3)]),  # no points: index 0
    ]


def _cuda_samples(dtype):
    for k, b, n, m in ((1, 1, 1, 1), (16, 2, 3000, 700), (3, 3, 300, 257), (40, 1, 500, 90), (100, 1, 120, 33)):
        yield Sample((k, random_points(b, n, dtype=dtype, seed=n), random_points(b, m, dtype=dtype, seed=m), False))
    yield Sample((8, random_points(2, 600, dtype=dtype, seed=1).transpose(1, 2), None, True))  # a strided view


class _KnnNet(torch.nn.Module):
    """knn in a model: the mean offset of each centre's neighbours."""

    def forward(self, xyz: torch.Tensor, center_xyz: torch.Tensor):
        idx = mmops.knn(4, xyz, center_xyz)  # [B, k, npoint]
        nbrs = torch.gather(xyz, 1, idx.long().flatten(1).unsqueeze(-1).expand(-1, -1, 3))
        return idx, nbrs, op(2, xyz.transpose(1, 2) * 2.0, None, True)


_Z = lambda *s, dtype=torch.float32: torch.zeros(*s, dtype=dtype)  # noqa: E731
CONFORMANCE = [
    ConformanceCase(
        "knn",
        op,
        _sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        empty=_empty,
        module=_KnnNet,
        cuda_samples=_cuda_samples,
        cuda_tol=lambda *_: dict(rtol=0, atol=0),
        bad_inputs={
            "k_zero": BadInput(lambda k, x, c, t: (0, x, c, t), r"k must lie in \[1, 100\], but got 0", meta=True),
            "k_101": BadInput(lambda k, x, c, t: (101, x, c, t), r"k must lie in \[1, 100\], but got 101"),
            "xyz_4_cols": BadInput(
                lambda k, x, c, t: (k, _Z(2, 30, 4, dtype=x.dtype), c, t),
                r"xyz to be a 3-D tensor of shape \[B, N, 3\]",
            ),
            "transposed_layout": BadInput(
                lambda k, x, c, t: (k, x, c, True), r"xyz to be a 3-D tensor of shape \[B, 3, N\] \(transposed\)"
            ),
            "int_xyz": BadInput(lambda k, x, c, t: (k, x.int(), c.int(), t), "floating point dtype, but got Int"),
            "dtypes_differ": BadInput(
                lambda k, x, c, t: (k, x, c.float(), t), r"center_xyz to have the dtype of xyz \(Double\)"
            ),
            "batches_differ": BadInput(
                lambda k, x, c, t: (k, x, c[:1], t), r"center_xyz to have the batch size of xyz \(2\)", meta=True
            ),
            "center_on_cuda": BadInput(
                lambda k, x, c, t: (k, x, c.cuda(), t), "center_xyz on the device of xyz", cuda=True
            ),
        },
    )
]


class TestKnnConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


def _topk_expected(xyz, centres, k):
    """mmcv's test: topk of the squared distances, transposed to [B, k, npoint]."""
    d = ((centres.unsqueeze(2) - xyz.unsqueeze(1)) ** 2).sum(-1)
    return d.topk(k=k, dim=2, largest=False)[1].transpose(2, 1)


def test_mmcv_vectors():
    xyz, centres = torch.tensor(MMCV_XYZ), torch.tensor(MMCV_CENTERS)
    expected = _topk_expected(xyz, centres, 5)
    assert torch.equal(mmops.knn(5, xyz, centres).long(), expected)
    xyz_t, centres_t = xyz.transpose(1, 2).contiguous(), centres.transpose(1, 2).contiguous()
    assert torch.equal(mmops.knn(5, xyz_t, centres_t, True).long(), expected)
    assert torch.equal(mmops.knn(5, xyz, xyz).long(), _topk_expected(xyz, xyz, 5))
    assert torch.equal(mmops.knn(5, xyz), mmops.knn(5, xyz, xyz))


@pytest.mark.parametrize("k", [1, 3, 16, 17, 33, 100])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_against_reference(k, dtype):
    xyz = random_points(2, 150, seed=k, dtype=dtype)
    centres = random_points(2, 20, seed=k + 1, dtype=dtype)
    out = op(k, xyz, centres)
    assert out.dtype == torch.int32 and out.shape == (2, k, 20)
    expected = knn_ref(k, xyz, centres) if dtype == torch.float64 else knn_ref(k, xyz.double(), centres.double())
    assert torch.equal(out, expected)


def test_ties_go_to_the_lower_index():
    """Points at equal distances (exact in binary): the lower index first; duplicates too."""
    xyz = torch.tensor([[[1.0, 0, 0], [0, 1, 0], [0, 0, -1], [0.5, 0, 0], [0, 1, 0], [-1, 0, 0], [0, 0.5, 0]]])
    centre = torch.zeros(1, 1, 3)
    assert op(7, xyz, centre)[0, :, 0].tolist() == [3, 6, 0, 1, 2, 4, 5]
    assert op(3, xyz, centre)[0, :, 0].tolist() == [3, 6, 0]
    assert torch.equal(op(7, xyz.double(), centre.double()), knn_ref(7, xyz.double(), centre.double()))


def test_more_neighbours_than_points():
    xyz = torch.tensor([[[2.0, 0, 0], [1.0, 0, 0]]])
    assert op(4, xyz, torch.zeros(1, 1, 3))[0, :, 0].tolist() == [1, 0, 0, 0]


def test_nan_ranks_last():
    nan, inf = float("nan"), float("inf")
    xyz = torch.tensor([[[nan, 0, 0], [3.0, 0, 0], [inf, 0, 0], [1.0, 0, 0], [0, nan, 0]]])
    centre = torch.zeros(1, 1, 3)
    assert op(5, xyz, centre)[0, :, 0].tolist() == [3, 1, 2, 0, 4]
    assert op(5, xyz.double(), centre.double())[0, :, 0].tolist() == [3, 1, 2, 0, 4]
    assert op(2, xyz, torch.full((1, 1, 3), nan))[0, :, 0].tolist() == [0, 1]  # all NaN: index order


def test_strided_and_transposed_inputs():
    xyz = random_points(2, 80, seed=3)
    centres = random_points(2, 11, seed=4)
    expected = op(6, xyz, centres)
    wide = torch.zeros(2, 80, 6, dtype=torch.float64)
    wide[..., ::2] = xyz
    assert torch.equal(op(6, wide[..., ::2], centres), expected)
    assert torch.equal(op(6, xyz.transpose(1, 2), centres.transpose(1, 2), True), expected)


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    xyz, centres = random_points(2, 64, dtype=torch.float32, seed=5), random_points(2, 10, dtype=torch.float32, seed=6)
    assert torch.equal(mmcv_ops.knn(6, xyz, centres), op(6, xyz, centres))
    assert torch.equal(mmcv_ops.knn(6, xyz.transpose(1, 2).contiguous(), None, True), op(6, xyz))


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [1, 16, 32, 64, 100])
def test_cuda_matches_cpu_large(dtype, k):
    xyz = random_points(2, 5000, seed=7).to(dtype)
    centres = random_points(2, 700, seed=8).to(dtype)
    assert torch.equal(op(k, xyz.cuda(), centres.cuda()).cpu(), op(k, xyz, centres))
    # many exact ties: a coarse integer grid
    grid = (random_points(1, 3000, seed=9) * 6).round().to(dtype)
    assert torch.equal(op(k, grid.cuda()).cpu(), op(k, grid))
