"""Tests of mmops::furthest_point_sample and furthest_point_sample_with_dist: the conformance
cases, the brute-force reference (exact indices), mmcv's vectors, ties, num_points > N,
non-finite inputs, the points samplers and the CUDA-specific tests (skipped without a GPU)."""

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from furthest_point_sample_reference import fps_dist_reference, fps_xyz_reference

import mmops

fps = torch.ops.mmops.furthest_point_sample
fps_dist = torch.ops.mmops.furthest_point_sample_with_dist
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]

# mmcv's tests/test_ops/test_furthest_point_sample.py
MMCV_XYZ = [
    [[-0.2748, 1.0020, -1.1674], [0.1015, 1.3952, -1.2681], [-0.8070, 2.4137, -0.5845]]
    + [[-1.0001, 2.1982, -0.5859], [0.3841, 1.8983, -0.7431]],
    [[-1.0696, 3.0758, -0.1899], [-0.2559, 3.5521, -0.1402], [0.8164, 4.0081, -0.1839]]
    + [[-1.1000, 3.0213, -0.8205], [-0.0518, 3.7251, -0.3950]],
]
MMCV_EXPECTED = [[0, 2, 4], [0, 2, 1]]


def random_cloud(b, n, *, dtype=torch.float64, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(b, n, 3, generator=g, dtype=torch.float64) * 10 - 5).to(dtype=dtype, device=device)


def square_matrix(xyz):
    return ((xyz.unsqueeze(1) - xyz.unsqueeze(2)) ** 2).sum(-1)


# ----------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    b, n, m = (2, 40, 7) if size == 0 else (3, 25, 7)  # m fixed: test_aoti exports one program
    return Sample((random_cloud(b, n, dtype=dtype, seed=size, device=device), m))


def _dist_sample(device, dtype, size):
    b, n, m = (2, 30, 7) if size == 0 else (3, 21, 7)
    return Sample((square_matrix(random_cloud(b, n, seed=size)).to(dtype=dtype, device=device), m))


def _empty(make):
    def empty(device, dtype):
        f = dict(dtype=dtype, device=device)
        return [
            Sample((make(0, 5, f), 3), out_shapes=[(0, 3)]),
            Sample((make(2, 5, f), 0), out_shapes=[(2, 0)]),
            Sample((make(2, 0, f), 0), out_shapes=[(2, 0)]),
        ]

    return empty


def _cuda_samples(make):
    def samples(dtype):
        # ties (a grid: many equal distances) and every kernel path: 4, 16, 32 points a thread, workspace
        grid = torch.stack(torch.meshgrid(*[torch.arange(6.0)] * 3, indexing="ij"), -1).reshape(1, -1, 3)
        yield Sample((make(grid).to(dtype), 60))
        for b, n, m in ((2, 1, 3), (3, 100, 100), (2, 5000, 64), (1, 16000, 40), (1, 40000, 20)):
            yield Sample((make(random_cloud(b, n, seed=n)).to(dtype), m))

    return samples


class _SampleNet(torch.nn.Module):
    """fps in a model: the picked points' coordinates, through the wrapper and the op."""

    def forward(self, xyz: torch.Tensor):
        idx = mmops.furthest_point_sample(xyz, 4)
        picked = torch.gather(xyz, 1, idx.long().unsqueeze(-1).expand(-1, -1, 3))
        return idx, picked, fps(xyz * 2.0, 3)


class _DistNet(torch.nn.Module):
    def forward(self, dist: torch.Tensor):
        return mmops.furthest_point_sample_with_dist(dist, 4), fps_dist(dist + 1.0, 2)


def _bad(op_name, shape_text):
    msg = f"mmops::{op_name}: .*"
    z = torch.zeros
    return {
        "wrong_shape": BadInput(lambda x, m: (z(2, 5, 2), 3), msg + shape_text),
        "rank_2": BadInput(lambda x, m: (z(5, 3), 3), msg + shape_text),
        "int_dtype": BadInput(lambda x, m: (x.int(), m), msg + "floating point dtype, but got Int"),
        "negative_num_points": BadInput(lambda x, m: (x, -1), msg + r"num_points >= 0, but got -1"),
        "num_points_2_31": BadInput(lambda x, m: (x, 2**31), msg + r"num_points < 2\^31"),
        "no_points": BadInput(lambda x, m: (x[:, :0], 2), msg + "num_points == 0 when"),
    }


CONFORMANCE = [
    ConformanceCase(
        "furthest_point_sample",
        fps,
        _sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        empty=_empty(lambda b, n, f: torch.rand(b, n, 3, **f)),
        module=_SampleNet,
        cuda_samples=_cuda_samples(lambda xyz: xyz),
        cuda_tol=lambda *_: dict(rtol=0, atol=0),
        bad_inputs=_bad("furthest_point_sample", r"points_xyz to be a 3-D tensor of shape \[B, N, 3\]"),
    ),
    ConformanceCase(
        "furthest_point_sample_with_dist",
        fps_dist,
        _dist_sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        empty=_empty(lambda b, n, f: torch.rand(b, n, n, **f)),
        module=_DistNet,
        cuda_samples=_cuda_samples(lambda xyz: square_matrix(xyz[:, :3000])),
        cuda_tol=lambda *_: dict(rtol=0, atol=0),
        bad_inputs={
            **{k: v for k, v in _bad("furthest_point_sample_with_dist", "").items() if k != "wrong_shape"},
            "no_points": BadInput(lambda x, m: (x[:, :0, :0], 2), "num_points == 0 when"),
            "not_square": BadInput(
                lambda x, m: (x[:, :, 1:], m), r"points_dist to be a 3-D tensor of shape \[B, N, N\]", meta=True
            ),
        },
    ),
]


class TestFurthestPointSampleConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize("b,n,m", [(1, 1, 1), (2, 50, 17), (3, 200, 64), (2, 7, 12)])
def test_matches_reference_float64(b, n, m):
    """No ties in random float64 clouds: exactly the brute-force indices (m > N included)."""
    xyz = random_cloud(b, n, seed=n)
    expected = fps_xyz_reference(xyz, m)
    assert torch.equal(fps(xyz, m), expected)
    assert torch.equal(fps_dist(square_matrix(xyz), m), fps_dist_reference(square_matrix(xyz), m))
    assert fps(xyz, m).dtype == torch.int32
    assert len(set(expected[0, : min(n, m)].tolist())) == min(n, m)  # distinct until every point is picked


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matches_reference_in_compute_precision(dtype):
    """float32 / half / bfloat16 inputs compute in float: the reference in float32 on the same values."""
    xyz = random_cloud(2, 150, seed=3, dtype=dtype)
    assert torch.equal(fps(xyz, 40), fps_xyz_reference(xyz, 40, dtype=torch.float32))
    dist = square_matrix(random_cloud(2, 80, seed=4)).to(dtype)
    assert torch.equal(fps_dist(dist, 30), fps_dist_reference(dist, 30, dtype=torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mmcv_known_vectors(dtype):
    xyz = torch.tensor(MMCV_XYZ, dtype=dtype)
    expected = torch.tensor(MMCV_EXPECTED, dtype=torch.int32)
    assert torch.equal(mmops.furthest_point_sample(xyz, 3), expected)
    assert torch.equal(mmops.furthest_point_sample_with_dist(square_matrix(xyz), 3), expected)


def test_ties_go_to_the_lowest_index():
    # a unit square's corners twice: after 0, the three others tie pairwise with their copies
    square = torch.tensor([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]])
    xyz = torch.cat([square, square]).unsqueeze(0)
    # 3 (diagonal, sqrt 2) beats 1 and 2; then 1 and 2 tie at distance 1: 1; then 2;
    # then every point is at distance 0 of a picked one: 0 first, always
    assert fps(xyz, 8).tolist() == [[0, 3, 1, 2, 0, 0, 0, 0]]
    # all points equal: every distance 0 -> index 0 every time
    assert fps(torch.ones(1, 5, 3), 4).tolist() == [[0, 0, 0, 0]]


def test_num_points_beyond_n_repeat_index_0():
    xyz = random_cloud(1, 4, seed=1)
    out = fps(xyz, 7)[0].tolist()
    assert sorted(out[:4]) == [0, 1, 2, 3] and out[4:] == [0, 0, 0]


def test_non_finite_coordinates():
    """A NaN distance counts as 0: a point with NaN coordinates is never picked while any
    point is still at a positive distance; an infinite point is picked first (its kept
    distance stays 1e10) and then treated like any picked point."""
    xyz = random_cloud(1, 6, seed=2)
    xyz[0, 2, 1] = float("nan")
    out = fps(xyz, 6)[0].tolist()
    assert 2 not in out[:5] and out == fps_xyz_reference(xyz, 6)[0].tolist()
    xyz = random_cloud(1, 6, seed=2)
    xyz[0, 4, 0] = float("inf")
    out = fps(xyz, 6)[0].tolist()
    assert out[1] == 4 and sorted(out) == list(range(6)) and out == fps_xyz_reference(xyz, 6)[0].tolist()
    dist = square_matrix(random_cloud(1, 6, seed=3))
    dist[0, :, 3] = float("nan")
    assert fps_dist(dist, 6).tolist() == fps_dist_reference(dist, 6).tolist()


def test_with_dist_reads_rows_of_the_picked_point():
    # an asymmetric matrix: the distances of every point to point p are row p
    d = torch.tensor([[[0.0, 1.0, 5.0], [9.0, 0.0, 2.0], [3.0, 4.0, 0.0]]])
    assert fps_dist(d, 3).tolist() == [[0, 2, 1]]  # row 0: 2 furthest; then min(1, 4) = 1 for point 1


def test_strided_input():
    xyz = random_cloud(2, 60, seed=5)
    wide = torch.cat([xyz, xyz], dim=2)[:, :, ::2]  # non-contiguous, same values
    assert not wide.is_contiguous() and torch.equal(fps(wide, 10), fps(xyz, 10))


def test_not_differentiable():
    xyz = random_cloud(1, 10).requires_grad_(True)
    assert not fps(xyz, 3).requires_grad


# ----------------------------------------------------------------------------- samplers


def test_calc_square_dist():
    a, b = torch.randn(2, 5, 4, dtype=torch.float64), torch.randn(2, 7, 4, dtype=torch.float64)
    brute = ((a.unsqueeze(2) - b.unsqueeze(1)) ** 2).sum(-1)
    torch.testing.assert_close(mmops.calc_square_dist(a, b, norm=False), brute)
    torch.testing.assert_close(mmops.calc_square_dist(a, b), brute.sqrt() / 4)


def test_points_sampler_modes():
    xyz, feats = random_cloud(2, 30, seed=6), torch.randn(2, 4, 30, dtype=torch.float64)
    joint = torch.cat([xyz, feats.transpose(1, 2)], dim=2)
    ffps = fps_dist_reference(square_matrix(joint), 5)
    assert torch.equal(mmops.PointsSampler([5])(xyz, None), fps_xyz_reference(xyz, 5))
    assert torch.equal(mmops.PointsSampler([5], ["F-FPS"])(xyz, feats), ffps)
    fs = mmops.PointsSampler([5], ["FS"])(xyz, feats)
    assert torch.equal(fs, torch.cat([ffps, fps_xyz_reference(xyz, 5)], dim=1))
    # two ranges: [0, 12) with D-FPS, then [12, 30) with F-FPS, offset by 12
    two = mmops.PointsSampler([4, 3], ["D-FPS", "F-FPS"], [12, -1])(xyz, feats)
    rest = fps_dist_reference(square_matrix(joint[:, 12:]), 3) + 12
    assert torch.equal(two, torch.cat([fps_xyz_reference(xyz[:, :12], 4), rest], dim=1))
    # half inputs are sampled in float32
    assert torch.equal(mmops.PointsSampler([5])(xyz.half(), None), fps(xyz.half().float(), 5))
    with pytest.raises(KeyError, match="supported sampler types"):
        mmops.PointsSampler([5], ["X"])
    with pytest.raises(ValueError, match="need features"):
        mmops.PointsSampler([5], ["F-FPS"])(xyz, None)


def test_points_sampler_scripts():
    sampler = mmops.PointsSampler([4, 3], ["D-FPS", "FS"], [10, -1])
    xyz, feats = random_cloud(2, 20, seed=7, dtype=torch.float32), torch.randn(2, 3, 20)
    assert torch.equal(torch.jit.script(sampler)(xyz, feats), sampler(xyz, feats))


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_reference_every_path(dtype):
    for b, n, m in ((1, 3000, 50), (1, 12000, 30), (1, 30000, 20), (1, 50000, 10)):
        xyz = random_cloud(b, n, seed=n).to(dtype)
        expected = fps_xyz_reference(xyz, m, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
        assert torch.equal(fps(xyz.cuda(), m).cpu(), expected), (n, dtype)


@pytest.mark.cuda
def test_cuda_graph_capture_and_empty():
    from conftest import capture_cuda_graph

    xyz = random_cloud(2, 500, device="cuda", dtype=torch.float32)
    graph, out = capture_cuda_graph(lambda: fps(xyz, 16))
    graph.replay()
    assert torch.equal(out.cpu(), fps(xyz.cpu(), 16))
    assert fps(xyz[:0], 4).shape == (0, 4) and fps(xyz, 0).shape == (2, 0)


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    xyz = torch.tensor(MMCV_XYZ)
    expected = torch.tensor(MMCV_EXPECTED, dtype=torch.int32)
    assert torch.equal(ops.furthest_point_sample(xyz, 3), expected)
    assert torch.equal(ops.furthest_point_sample_with_dist(square_matrix(xyz), 3), expected)
    # mmcv's own PointsSampler (its module-level furthest_point_sample is routed too)
    feats = torch.randn(2, 4, 5)
    assert torch.equal(ops.PointsSampler([3])(xyz, feats), expected)
    assert torch.equal(ops.PointsSampler([3], ["FS"])(xyz, feats), mmops.PointsSampler([3], ["FS"])(xyz, feats))
