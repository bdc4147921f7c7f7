"""mmops.ball_query (dense) and stack_ball_query: the conformance cases, mmcv's
published vectors, the float64 brute-force reference, the radius boundaries, the
fill rules, NaN coordinates, the counts' validation, the mmcv.ops bridge and the
CUDA-specific tests (skipped without a GPU)."""

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import strict_index_check
from neighbors_reference import ball_query_ref, stack_ball_query_ref

import mmops

dense = torch.ops.mmops.ball_query
stacked = torch.ops.mmops.stack_ball_query
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]

# mmcv tests/test_ops/test_ball_query.py
MMCV_CENTERS = [
    [[-0.0740, 1.3147, -1.3625], [-2.2769, 2.7817, -0.2334], [-0.4003, 2.4666, -0.5116], [-0.0740, 1.3147, -1.3625],
     [-0.0740, 1.3147, -1.3625]],
    [[-2.0289, 2.4952, -0.1708], [-2.0668, 6.0278, -0.4875], [0.4066, 1.4211, -0.2947], [-2.0289, 2.4952, -0.1708],
     [-2.0289, 2.4952, -0.1708]],
]  # fmt: skip
MMCV_XYZ = [
    [[-0.0740, 1.3147, -1.3625], [0.5555, 1.0399, -1.3634], [-0.4003, 2.4666, -0.5116], [-0.5251, 2.4379, -0.8466],
     [-0.9691, 1.1418, -1.3733], [-0.2232, 0.9561, -1.3626], [-2.2769, 2.7817, -0.2334], [-0.2822, 1.3192, -1.3645],
     [0.1533, 1.5024, -1.0432], [0.4917, 1.1529, -1.3496]],
    [[-2.0289, 2.4952, -0.1708], [-0.7188, 0.9956, -0.5096], [-2.0668, 6.0278, -0.4875], [-1.9304, 3.3092, 0.6610],
     [0.0949, 1.4332, 0.3140], [-1.2879, 2.0008, -0.7791], [-0.7252, 0.9611, -0.6371], [0.4066, 1.4211, -0.2947],
     [0.3220, 1.4447, 0.3548], [-0.9744, 2.3856, -1.2000]],
]  # fmt: skip


def random_points(*shape, dtype=torch.float64, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, 3, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)


def stacked_inputs(counts, centre_counts, *, dtype=torch.float64, seed=0, device="cpu", cnt_dtype=torch.int32):
    xyz = random_points(sum(counts), dtype=dtype, seed=seed, device=device)
    # centres: half of them on points of their batch (d2 == 0), the rest random
    centres, start = [random_points(0, dtype=dtype, device=device)], 0
    for n, m in zip(counts, centre_counts):
        own = xyz[start : start + n][: m // 2]
        centres += [own, random_points(m - len(own), dtype=dtype, seed=seed + 7 + n, device=device)]
        start += n
    cnt = torch.tensor(counts, dtype=cnt_dtype, device=device)
    ccnt = torch.tensor(centre_counts, dtype=cnt_dtype, device=device)
    return xyz, torch.cat(centres), cnt, ccnt


# ----------------------------------------------------------------------------- conformance


def _dense_sample(device, dtype, size):
    b, n, m = (2, 40, 7) if size == 0 else (3, 25, 9)
    return Sample((0.05, 0.4, 6, random_points(b, n, dtype=dtype, seed=size, device=device),
                   random_points(b, m, dtype=dtype, seed=10 + size, device=device)))  # fmt: skip


def _dense_empty(device, dtype):
    p = lambda *s: random_points(*s, dtype=dtype, device=device)  # noqa: E731
    return [
        Sample((0.0, 0.3, 4, p(2, 0), p(2, 5)), out_shapes=[(2, 5, 4)]),
        Sample((0.0, 0.3, 4, p(2, 6), p(2, 0)), out_shapes=[(2, 0, 4)]),
        Sample((0.0, 0.3, 4, p(0, 6), p(0, 3)), out_shapes=[(0, 3, 4)]),
        Sample((0.0, 0.3, 0, p(2, 6), p(2, 3)), out_shapes=[(2, 3, 0)]),
    ]


def _dense_cuda_samples(dtype):
    for b, n, m, s in ((1, 1, 1, 1), (2, 3000, 700, 32), (3, 500, 257, 5)):
        yield Sample((0.0, 0.2, s, random_points(b, n, dtype=dtype, seed=n), random_points(b, m, dtype=dtype, seed=m)))
    yield Sample((0.1, 0.3, 16, random_points(2, 900, dtype=dtype, seed=3), random_points(2, 300, dtype=dtype, seed=4)))


def _stack_sample(device, dtype, size):
    # no batch count of 3 (torch.compile would take it for the coordinate axis' size)
    counts, centres = ([30, 0, 25, 9], [4, 3, 5, 2]) if size == 0 else ([12, 40], [6, 2])
    return Sample((0.35, 5, *stacked_inputs(counts, centres, dtype=dtype, seed=size, device=device)))


def _stack_empty(device, dtype):
    xyz, ctr, cnt, ccnt = stacked_inputs([5, 4], [0, 0], dtype=dtype, device=device)
    exyz, ectr, ecnt, eccnt = stacked_inputs([], [], dtype=dtype, device=device)
    return [
        Sample((0.3, 4, xyz, ctr, cnt, ccnt), out_shapes=[(0, 4)]),
        Sample((0.3, 4, exyz, ectr, ecnt, eccnt), out_shapes=[(0, 4)]),
        Sample((0.3, 0, *stacked_inputs([5], [2], dtype=dtype, device=device)), out_shapes=[(2, 0)]),
    ]


def _stack_cuda_samples(dtype):
    yield Sample((0.2, 32, *stacked_inputs([2000, 1, 0, 900], [300, 1, 4, 200], dtype=dtype, seed=5)))
    yield Sample((0.5, 3, *stacked_inputs([7], [9], dtype=dtype, seed=6, cnt_dtype=torch.int64)))


class _BallNet(torch.nn.Module):
    """ball_query in a model: grouping each centre's neighbours' coordinates."""

    def forward(self, xyz: torch.Tensor, center_xyz: torch.Tensor):
        idx = mmops.ball_query(0.05, 0.4, 6, xyz, center_xyz)
        grouped = torch.gather(xyz, 1, idx.long().flatten(1).unsqueeze(-1).expand(-1, -1, 3))
        return idx, grouped, dense(0.0, 0.25, 3, xyz * 2.0, center_xyz)


class _StackNet(torch.nn.Module):
    def forward(self, xyz: torch.Tensor, center_xyz: torch.Tensor, cnt: torch.Tensor, ccnt: torch.Tensor):
        return mmops.ball_query(0.0, 0.35, 5, xyz, center_xyz, cnt, ccnt), stacked(0.2, 2, xyz, center_xyz, cnt, ccnt)


_P = lambda *s, dtype=torch.float32: torch.zeros(*s, 3, dtype=dtype)  # noqa: E731
_EXACT = lambda *_: dict(rtol=0, atol=0)  # noqa: E731
CONFORMANCE = [
    ConformanceCase(
        "ball_query",
        dense,
        _dense_sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        empty=_dense_empty,
        module=_BallNet,
        cuda_samples=_dense_cuda_samples,
        cuda_tol=_EXACT,
        bad_inputs={
            "min_not_below_max": BadInput(
                lambda a, b, s, x, c: (0.5, 0.5, s, x, c), "max_radius must be a finite number greater than min_radius"
            ),
            "negative_min": BadInput(lambda a, b, s, x, c: (-0.1, b, s, x, c), "min_radius must be a finite number"),
            "nan_max": BadInput(lambda a, b, s, x, c: (a, float("nan"), s, x, c), "max_radius must be a finite"),
            "sample_num_negative": BadInput(lambda a, b, s, x, c: (a, b, -1, x, c), r"sample_num must lie in \[0, "),
            "sample_num_huge": BadInput(lambda a, b, s, x, c: (a, b, 1 << 20, x, c), r"sample_num must lie in \[0, "),
            "xyz_2d": BadInput(
                lambda a, b, s, x, c: (a, b, s, x[0], c), r"expected xyz to be a 3-D tensor of shape \[B, N, 3\]"
            ),
            "center_4_cols": BadInput(
                lambda a, b, s, x, c: (a, b, s, x, torch.zeros(2, 7, 4, dtype=x.dtype)),
                r"expected center_xyz to be a 3-D tensor of shape \[B, npoint, 3\]",
            ),
            "int_xyz": BadInput(
                lambda a, b, s, x, c: (a, b, s, x.int(), c.int()), "xyz to have a floating point dtype, but got Int"
            ),
            "dtypes_differ": BadInput(
                lambda a, b, s, x, c: (a, b, s, x, c.float()),
                r"expected center_xyz to have the dtype of xyz \(Double\), but got Float",
            ),
            "batches_differ": BadInput(
                lambda a, b, s, x, c: (a, b, s, x, c[:1]), r"center_xyz to have the batch size of xyz \(2\)", meta=True
            ),
            "center_on_cuda": BadInput(
                lambda a, b, s, x, c: (a, b, s, x, c.cuda()), "center_xyz on the device of xyz", cuda=True
            ),
        },
    ),
    ConformanceCase(
        "stack_ball_query",
        stacked,
        _stack_sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        empty=_stack_empty,
        module=_StackNet,
        cuda_samples=_stack_cuda_samples,
        cuda_tol=_EXACT,
        bad_inputs={
            "nan_radius": BadInput(lambda r, s, *t: (float("nan"), s, *t), "max_radius must be a finite number"),
            "xyz_3d": BadInput(
                lambda r, s, x, c, n, m: (r, s, x[None], c, n, m), r"expected xyz to be a 2-D tensor of shape"
            ),
            "float_counts": BadInput(
                lambda r, s, x, c, n, m: (r, s, x, c, n.float(), m), "xyz_batch_cnt to be int32 or int64, but got Float"
            ),
            "counts_2d": BadInput(
                lambda r, s, x, c, n, m: (r, s, x, c, n, m[None]), r"center_xyz_batch_cnt to be a 1-D tensor \[B\]"
            ),
            "count_lengths_differ": BadInput(
                lambda r, s, x, c, n, m: (r, s, x, c, n, m[:2]),
                r"center_xyz_batch_cnt to have the length of xyz_batch_cnt \(4\), but got 2",
                meta=True,
            ),
            "counts_sum": BadInput(
                lambda r, s, x, c, n, m: (r, s, x, c, n + 1, m),
                r"expected xyz_batch_cnt to sum to the number of points in xyz \(64\), but got 68",
            ),
            "centre_counts_sum": BadInput(
                lambda r, s, x, c, n, m: (r, s, x, c, n, m - 1),
                r"expected center_xyz_batch_cnt to sum to the number of centres in center_xyz \(14\), but got 10",
            ),
            "negative_count": BadInput(
                lambda r, s, x, c, n, m: (r, s, x, c, torch.tensor([31, -1, 25, 9], dtype=n.dtype), m),
                r"xyz_batch_cnt must hold counts >= 0, but xyz_batch_cnt\[1\] = -1",
            ),
            "counts_on_cuda": BadInput(
                lambda r, s, x, c, n, m: (r, s, x, c, n.cuda(), m), "xyz_batch_cnt on the device of xyz", cuda=True
            ),
        },
    ),
]


class TestBallQueryConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mmcv_vectors(dtype):
    xyz = torch.tensor(MMCV_XYZ, dtype=dtype)
    centres = torch.tensor(MMCV_CENTERS, dtype=dtype)
    expected = [[[0] * 5, [6] * 5, [2] * 5, [0] * 5, [0] * 5], [[0] * 5, [2] * 5, [7] * 5, [0] * 5, [0] * 5]]
    assert mmops.ball_query(0, 0.2, 5, xyz, centres).tolist() == expected
    dilated = [
        [[0, 5, 7, 0, 0], [6] * 5, [2, 3, 2, 2, 2], [0, 5, 7, 0, 0], [0, 5, 7, 0, 0]],
        [[0] * 5, [2] * 5, [7] * 5, [0] * 5, [0] * 5],
    ]
    assert mmops.ball_query(0.2, 0.4, 5, xyz, centres).tolist() == dilated


@pytest.mark.parametrize("radii", [(0.0, 0.15), (0.1, 0.3), (0.25, 0.6)])
@pytest.mark.parametrize("sample_num", [1, 7, 64])
def test_dense_against_reference(radii, sample_num):
    xyz = random_points(3, 200, seed=1)
    centres = torch.cat([xyz[:, :10], random_points(3, 30, seed=2)], 1)  # some centres on points
    out = dense(*radii, sample_num, xyz, centres)
    assert out.dtype == torch.int32 and out.shape == (3, 40, sample_num)
    assert torch.equal(out, ball_query_ref(*radii, sample_num, xyz, centres))
    assert torch.equal(dense(*radii, sample_num, xyz.float(), centres.float()), out)  # no boundary case drawn


@pytest.mark.parametrize("cnt_dtype", [torch.int32, torch.int64])
def test_stacked_against_reference(cnt_dtype):
    args = stacked_inputs([50, 0, 1, 80], [6, 3, 2, 9], seed=3, cnt_dtype=cnt_dtype)
    for radius, samples in ((0.1, 4), (0.3, 16), (0.8, 3)):
        out = stacked(radius, samples, *args)
        assert torch.equal(out, stack_ball_query_ref(radius, samples, *args)), (radius, samples)
    assert (stacked(0.3, 16, *args)[6:9, 0] == -1).all()  # the batch without points


def test_stacked_matches_dense_per_batch():
    xyz, ctr, cnt, ccnt = stacked_inputs([40, 40], [10, 10], seed=4)
    out = stacked(0.3, 8, xyz, ctr, cnt, ccnt)
    dense_out = dense(0.0, 0.3, 8, xyz.view(2, 40, 3), ctr.view(2, 10, 3)).view(20, 8)
    # the same neighbours: stacked marks an empty ball with -1, dense with 0
    assert torch.equal(torch.where(out < 0, 0, out), dense_out)


def test_radius_boundaries():
    """min_radius is inclusive, max_radius exclusive, the centre itself (d2 == 0) always in;
    points on the axes at exactly representable distances."""
    centre = torch.zeros(1, 1, 3, dtype=torch.float64)
    pts = torch.tensor([[[0.5, 0, 0], [0, 0.25, 0], [0, 0, 0.75], [0, 0, 0], [1.0, 0, 0], [0.125, 0, 0]]],
                       dtype=torch.float64)  # fmt: skip
    assert dense(0.25, 0.75, 6, pts, centre)[0, 0].tolist() == [0, 1, 3, 0, 0, 0]
    assert dense(0.5, 1.0, 6, pts, centre)[0, 0].tolist() == [0, 2, 3, 0, 0, 0]
    assert dense(0.0, 0.125, 6, pts, centre)[0, 0].tolist() == [3, 3, 3, 3, 3, 3]
    assert dense(0.0, 0.126, 2, pts, centre)[0, 0].tolist() == [3, 5]
    xyz, ctr, cnt, ccnt = pts[0], centre[0], torch.tensor([6]), torch.tensor([1])
    assert stacked(0.5, 6, xyz, ctr, cnt, ccnt)[0].tolist() == [1, 3, 5, 1, 1, 1]  # 0.5 itself excluded
    assert stacked(0.0, 3, xyz, ctr, cnt, ccnt)[0].tolist() == [-1, 0, 0]  # d2 < 0 never holds


def test_fill_rules():
    xyz = torch.tensor([[[5.0, 5, 5], [0.1, 0, 0], [9, 9, 9], [0, 0.1, 0]]])
    centre = torch.zeros(1, 2, 3)
    centre[0, 1] = 20.0
    assert dense(0.0, 0.5, 5, xyz, centre)[0].tolist() == [[1, 3, 1, 1, 1], [0, 0, 0, 0, 0]]
    out = stacked(0.5, 4, xyz[0], centre[0], torch.tensor([4]), torch.tensor([2]))
    assert out.tolist() == [[1, 3, 1, 1], [-1, 0, 0, 0]]


def test_nonfinite_coordinates():
    """A NaN distance is in no ball; an infinite coordinate is far from every finite centre;
    a NaN centre finds nothing."""
    nan, inf = float("nan"), float("inf")
    xyz = torch.tensor([[[nan, 0, 0], [0.1, 0, 0], [inf, 0, 0], [0, 0, 0]]])
    centres = torch.tensor([[[0.0, 0, 0], [nan, 0, 0], [inf, 0, 0]]])
    out = dense(0.0, 1.0, 3, xyz, centres)[0].tolist()
    assert out[0] == [1, 3, 1] and out[1] == [0, 0, 0] and out[2] == [0, 0, 0]  # inf - inf is NaN
    assert torch.equal(dense(0.0, 1.0, 3, xyz, centres), ball_query_ref(0.0, 1.0, 3, xyz, centres))


def test_strided_inputs():
    xyz = random_points(2, 60, seed=5)
    centres = random_points(2, 9, seed=6)
    wide = torch.zeros(2, 60, 6, dtype=torch.float64)
    wide[..., 1::2] = xyz
    expected = dense(0.0, 0.3, 5, xyz, centres)
    assert torch.equal(dense(0.0, 0.3, 5, wide[..., 1::2], centres.transpose(1, 2).contiguous().transpose(1, 2)),
                       expected)  # fmt: skip


def test_wrapper_is_stacked_with_both_counts_only():
    """As mmcv: one count alone runs the dense query (which then wants [B, N, 3])."""
    xyz, ctr, cnt, ccnt = stacked_inputs([5], [2])
    assert torch.equal(mmops.ball_query(0.0, 0.3, 2, xyz, ctr, cnt, ccnt), stacked(0.3, 2, xyz, ctr, cnt, ccnt))
    with pytest.raises(RuntimeError, match=r"mmops::ball_query: expected xyz to be a 3-D tensor"):
        mmops.ball_query(0.0, 0.3, 2, xyz, ctr, cnt)
    dense_args = (xyz[None], ctr[None])
    assert torch.equal(mmops.ball_query(0.0, 0.3, 2, *dense_args, None, ccnt), dense(0.0, 0.3, 2, *dense_args))


def test_not_differentiable():
    xyz = random_points(1, 8, seed=7).requires_grad_(True)
    out = dense(0.0, 0.5, 3, xyz, xyz.detach())
    assert not out.requires_grad


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    xyz = torch.tensor(MMCV_XYZ)
    centres = torch.tensor(MMCV_CENTERS)
    assert torch.equal(mmcv_ops.ball_query(0.2, 0.4, 5, xyz, centres), dense(0.2, 0.4, 5, xyz, centres))
    args = stacked_inputs([20, 30], [4, 6], dtype=torch.float32, seed=8)
    assert torch.equal(mmcv_ops.ball_query(0.0, 0.3, 4, args[0], args[1], args[2], args[3]), stacked(0.3, 4, *args))


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_large(dtype):
    xyz = random_points(2, 20000, seed=9).to(dtype)
    centres = random_points(2, 1500, seed=10).to(dtype)
    for radii, samples in (((0.0, 0.05), 32), ((0.05, 0.1), 64)):
        assert torch.equal(
            dense(*radii, samples, xyz.cuda(), centres.cuda()).cpu(), dense(*radii, samples, xyz, centres)
        )


@pytest.mark.cuda
def test_cuda_unchecked_counts_are_guarded():
    """Wrong counts on CUDA without the strict switch: defined results (no out-of-range
    read); with the switch: the CPU's error."""
    xyz, ctr, cnt, ccnt = stacked_inputs([10, 10], [3, 3], seed=11, device="cuda")
    bad = torch.tensor([15, 30], dtype=torch.int32, device="cuda")
    out = stacked(0.5, 4, xyz, ctr, bad, torch.tensor([3, 1], dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    assert (out[4:, 0] == -1).all() and (out >= -1).all() and (out < 20).all()
    with strict_index_check(True), pytest.raises(RuntimeError, match="xyz_batch_cnt to sum to"):
        stacked(0.5, 4, xyz, ctr, bad, ccnt)
