"""mmops hard_voxelize and dynamic_voxelize (mmcv's Voxelization): the conformance cases,
then the float64-style references of voxelization_reference.py, a hand-derived vector
on mmcv's test configuration, boundaries / NaN / Inf, the wrappers and module, the
mmcv.ops bridge and the CUDA-specific tests (skipped without a GPU)."""

import importlib

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from voxelization_reference import dynamic_voxelize_ref, hard_voxelize_ref

import mmops

hard_op = torch.ops.mmops.hard_voxelize
dynamic_op = torch.ops.mmops.dynamic_voxelize

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
VOXEL = [1.0, 1.0, 0.5]
RANGE = [0.0, -4.0, -1.0, 4.0, 4.0, 1.0]  # 4 x 8 x 4 voxels
MAX_POINTS, MAX_VOXELS = 3, 40


def random_cloud(n, *, seed=0, dtype=torch.float32, device="cpu", ndim=4):
    """Points around RANGE (about 15% out of range), a few exactly on voxel faces."""
    g = torch.Generator().manual_seed(seed)
    lo = torch.tensor([-0.5, -4.5, -1.2], dtype=torch.float64)
    hi = torch.tensor([4.5, 4.5, 1.2], dtype=torch.float64)
    xyz = lo + torch.rand(n, 3, generator=g, dtype=torch.float64) * (hi - lo)
    xyz[::7] = torch.round(xyz[::7])  # on voxel faces and range bounds
    extra = torch.rand(n, ndim - 3, generator=g, dtype=torch.float64)
    return torch.cat([xyz, extra], 1).to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------- conformance


class _Voxelizer(torch.nn.Module):
    """Hard and dynamic voxelization and a mean over each voxel's points."""

    def __init__(self):
        super().__init__()
        self.voxel_size, self.coors_range = VOXEL, RANGE
        self.max_points, self.max_voxels = MAX_POINTS, MAX_VOXELS

    def forward(self, points: torch.Tensor):
        voxel_size, coors_range = self.voxel_size, self.coors_range
        voxels, coors, num = torch.ops.mmops.hard_voxelize(
            points, voxel_size, coors_range, self.max_points, self.max_voxels
        )
        mean = voxels.sum(1) / num.clamp(min=1).unsqueeze(1).to(voxels.dtype)
        return voxels, coors, num, mean, torch.ops.mmops.dynamic_voxelize(points, voxel_size, coors_range)


def _sample(hard):
    def sample(device, dtype, size):
        points = random_cloud(60 if size == 0 else 90, seed=3 + size, dtype=dtype, device=device)
        return Sample((points, VOXEL, RANGE, MAX_POINTS, MAX_VOXELS) if hard else (points, VOXEL, RANGE))

    return sample


def _empty(hard):
    def empty(device, dtype):
        points = torch.zeros(0, 4, dtype=dtype, device=device)
        if hard:
            return [Sample((points, VOXEL, RANGE, MAX_POINTS, MAX_VOXELS), out_shapes=[(0, 3, 4), (0, 3), (0,)])]
        return [Sample((points, VOXEL, RANGE), out_shapes=[(0, 3)])]

    return empty


def _cuda_samples(hard):
    def samples(dtype):
        for n in (1, 255, 256, 257, 5000):
            points = random_cloud(n, seed=n, dtype=dtype)
            for max_points, max_voxels in ((1, 5), (5, 40), (35, 20000)) if hard else ((0, 0),):
                yield Sample((points, VOXEL, RANGE, max_points, max_voxels) if hard else (points, VOXEL, RANGE))

    return samples


_Z = torch.zeros


def _bad_grid(hard):
    tail = (MAX_POINTS, MAX_VOXELS) if hard else ()
    return {
        "points_2_cols": BadInput(
            lambda *_: (_Z(3, 2), VOXEL, RANGE, *tail), r"points to be a 2-D tensor of shape \[N, ndim\] with ndim >= 3"
        ),
        "points_int": BadInput(
            lambda *_: (_Z(3, 4, dtype=torch.int32), VOXEL, RANGE, *tail), "points to have a floating point dtype"
        ),
        "voxel_size_len": BadInput(lambda *_: (_Z(3, 4), [1.0, 1.0], RANGE, *tail), "voxel_size to have 3 values"),
        "voxel_size_zero": BadInput(
            lambda *_: (_Z(3, 4), [0.0, 1.0, 1.0], RANGE, *tail), r"voxel_size\[0\] to be a positive finite float32"
        ),
        "range_nan": BadInput(
            lambda *_: (_Z(3, 4), VOXEL, [float("nan")] + RANGE[1:], *tail), "coors_range to hold finite float32"
        ),
        "range_reversed": BadInput(
            lambda *_: (_Z(3, 4), VOXEL, [4.0, -4.0, -1.0, 0.0, 4.0, 1.0], *tail),
            "coors_range and voxel_size to give 1 to 1073741824 voxels along x",
        ),
    }


CONFORMANCE = [
    ConformanceCase(
        "hard_voxelize",
        hard_op,
        _sample(True),
        dtypes=DTYPES,
        data_dependent=True,
        empty=_empty(True),
        module=_Voxelizer,
        cuda_samples=_cuda_samples(True),
        bad_inputs={
            **_bad_grid(True),
            "max_points_zero": BadInput(
                lambda *_: (_Z(3, 4), VOXEL, RANGE, 0, 10), r"max_points in \[1, 2147483647\], but got 0"
            ),
            "max_voxels_dynamic": BadInput(
                lambda *_: (_Z(3, 4), VOXEL, RANGE, 5, -1), r"max_voxels in \[1, 2147483647\], but got -1"
            ),
            "output_rows": BadInput(
                lambda *_: (_Z(3, 4), VOXEL, RANGE, 1 << 16, 1 << 16), r"max_voxels \* max_points .* at most 2\^31 - 1"
            ),
        },
    ),
    ConformanceCase(
        "dynamic_voxelize",
        dynamic_op,
        _sample(False),
        dtypes=DTYPES,
        empty=_empty(False),
        cuda_samples=_cuda_samples(False),
        bad_inputs={name: BadInput(b.make, b.match, meta=True) for name, b in _bad_grid(False).items()},
    ),
]


class TestVoxelizationConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- references


def assert_hard_equal(got, expected):
    voxels, coors, num = got
    e_voxels, e_coors, e_num = expected
    assert coors.dtype == num.dtype == torch.int32
    assert torch.equal(coors.cpu(), e_coors) and torch.equal(num.cpu(), e_num)
    assert voxels.dtype == e_voxels.dtype and torch.equal(voxels.cpu(), e_voxels)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,max_points,max_voxels", [(1, 1, 1), (50, 1, 100), (200, 3, 40), (400, 35, 20000)])
def test_hard_matches_reference(dtype, n, max_points, max_voxels):
    points = random_cloud(n, seed=n + max_points, dtype=dtype)
    got = hard_op(points, VOXEL, RANGE, max_points, max_voxels)
    assert_hard_equal(got, hard_voxelize_ref(points, VOXEL, RANGE, max_points, max_voxels))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 64, 500])
def test_dynamic_matches_reference(dtype, n):
    points = random_cloud(n, seed=n, dtype=dtype, ndim=5)
    assert torch.equal(dynamic_op(points, VOXEL, RANGE), dynamic_voxelize_ref(points, VOXEL, RANGE))


# mmcv's test configuration (tests/test_ops/test_voxelization.py): voxel 0.5, KITTI range;
# the grid is round(70.4 / 0.5) = 141 x 160 x 8, so x in [0, 70.5) is in range.
MMCV_VOXEL = [0.5, 0.5, 0.5]
MMCV_RANGE = [0, -40, -3, 70.4, 40, 1]
NAN, INF = float("nan"), float("inf")
KNOWN_POINTS = [
    [0.1, -39.9, -2.9, 1.0],  # (0, 0, 0)
    [10.2, 0.3, 0.6, 2.0],  # (7, 80, 20)
    [0.4, -39.6, -2.6, 3.0],  # (0, 0, 0)
    [70.4, 0.0, 0.0, 4.0],  # (6, 80, 140): past x_max but inside the rounded grid
    [5.0, 40.0, 0.0, 5.0],  # y == y_max: out
    [10.3, 0.4, 0.9, 6.0],  # (7, 80, 20)
    [NAN, 0.0, 0.0, 7.0],  # out
    [INF, 0.0, 0.0, 8.0],  # out
    [0.0, -40.0, -3.0, 9.0],  # exactly the range minimum: (0, 0, 0)
    [70.49, 0.0, 0.0, 10.0],  # (6, 80, 140)
    [70.5, 0.0, 0.0, 11.0],  # cell 141 == the grid: out
    [1.0, -INF, 0.0, 12.0],  # out
]
KNOWN_DYNAMIC = [
    [0, 0, 0],
    [7, 80, 20],
    [0, 0, 0],
    [6, 80, 140],
    [-1, -1, -1],
    [7, 80, 20],
    [-1, -1, -1],
    [-1, -1, -1],
    [0, 0, 0],
    [6, 80, 140],
    [-1, -1, -1],
    [-1, -1, -1],
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_known_vector_dynamic(dtype):
    points = torch.tensor(KNOWN_POINTS, dtype=dtype)
    assert dynamic_op(points, MMCV_VOXEL, MMCV_RANGE).tolist() == KNOWN_DYNAMIC


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_known_vector_hard(dtype):
    points = torch.tensor(KNOWN_POINTS, dtype=dtype)
    voxels, coors, num = hard_op(points, MMCV_VOXEL, MMCV_RANGE, 2, 20)
    # voxels by first point (0, 1, 3); point 8 is the third of voxel 0: dropped
    assert coors.tolist() == [[0, 0, 0], [7, 80, 20], [6, 80, 140]]
    assert num.tolist() == [2, 2, 2]
    assert torch.equal(voxels, points[torch.tensor([[0, 2], [1, 5], [3, 9]])])
    voxels, coors, num = hard_op(points, MMCV_VOXEL, MMCV_RANGE, 3, 2)  # the third voxel dropped
    assert coors.tolist() == [[0, 0, 0], [7, 80, 20]] and num.tolist() == [3, 2]
    assert torch.equal(voxels[0], points[torch.tensor([0, 2, 8])]) and torch.equal(
        voxels[1, 2], torch.zeros(4, dtype=dtype)
    )


def test_float32_parameters():
    """voxel_size and coors_range act as float32 (mmcv's parameters), for float64 points too:
    0.1 as float32 is 0.100000001490116..., so 0.3 / 0.1f < 3."""
    points = torch.tensor([[0.3, 0.0, 0.0]], dtype=torch.float64)
    coors = dynamic_op(points, [0.1, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    assert coors.tolist() == [[0, 0, 2]]


def test_max_voxels_keeps_first_voxels_and_is_deterministic():
    points = random_cloud(300, seed=5)
    full = hard_op(points, VOXEL, RANGE, 4, 20000)
    part = hard_op(points, VOXEL, RANGE, 4, 7)
    assert torch.equal(part[1], full[1][:7]) and torch.equal(part[0], full[0][:7])
    again = hard_op(points, VOXEL, RANGE, 4, 7)
    assert all(torch.equal(a, b) for a, b in zip(part, again))


def test_strided_points():
    points = random_cloud(100, seed=9, ndim=6)
    strided = points[:, ::2]
    assert strided.shape[1] == 3 and not strided.is_contiguous()
    for got, exp in zip(hard_op(strided, VOXEL, RANGE, 3, 50), hard_op(strided.contiguous(), VOXEL, RANGE, 3, 50)):
        assert torch.equal(got, exp)
    assert torch.equal(dynamic_op(strided, VOXEL, RANGE), dynamic_op(strided.contiguous(), VOXEL, RANGE))


def test_all_out_of_range():
    points = torch.full((5, 4), NAN)
    voxels, coors, num = hard_op(points, VOXEL, RANGE, 3, 10)
    assert voxels.shape == (0, 3, 4) and coors.shape == (0, 3) and num.shape == (0,)
    assert (dynamic_op(points, VOXEL, RANGE) == -1).all()


def test_not_differentiable():
    points = random_cloud(20, seed=1).requires_grad_(True)
    voxels = hard_op(points, VOXEL, RANGE, 3, 10)[0]
    with pytest.raises(RuntimeError, match="not implemented"):
        voxels.sum().backward()


# ----------------------------------------------------------------------------- wrappers and module


def test_voxelization_wrapper_modes():
    points = random_cloud(80, seed=2)
    hard = mmops.voxelization(points, VOXEL, RANGE, 4, 30, deterministic=False)
    assert_hard_equal(hard, hard_voxelize_ref(points, VOXEL, RANGE, 4, 30))
    for mp, mv in ((-1, 30), (4, -1)):
        assert torch.equal(mmops.voxelization(points, VOXEL, RANGE, mp, mv), dynamic_voxelize_ref(points, VOXEL, RANGE))


def test_voxelization_module_train_eval_and_script():
    points = random_cloud(120, seed=4)
    layer = mmops.Voxelization(VOXEL, [int(v) for v in RANGE], 2, (5, 9))
    assert layer.grid_size.tolist() == [4, 8, 4] and layer.pcd_shape == [1, 8, 4]
    assert layer(points)[1].shape[0] == 5
    layer.eval()
    assert_hard_equal(layer(points), hard_voxelize_ref(points, VOXEL, RANGE, 2, 9))
    scripted = torch.jit.script(layer)
    assert all(torch.equal(a, b) for a, b in zip(scripted(points), layer(points)))
    dynamic = mmops.Voxelization(VOXEL, RANGE, -1)
    assert torch.equal(torch.jit.script(dynamic)(points), dynamic_voxelize_ref(points, VOXEL, RANGE))


def test_mmcv_bridge_voxelization():
    pytest.importorskip("mmcv")
    importlib.import_module("mmops.mmcv_ops")  # first: routes mmcv's Functions to mmops
    from mmcv.ops import Voxelization

    points = random_cloud(150, seed=8)
    hard = Voxelization(VOXEL, RANGE, 3, 25)
    assert_hard_equal(hard(points), hard_voxelize_ref(points, VOXEL, RANGE, 3, 25))
    assert torch.equal(Voxelization(VOXEL, RANGE, -1)(points), dynamic_voxelize_ref(points, VOXEL, RANGE))


# ----------------------------------------------------------------------------- CUDA


def lidar_cloud(n, seed=0, dtype=torch.float32):
    """Rings around the sensor (dense near it) in the KITTI range, and some clutter."""
    g = torch.Generator().manual_seed(seed)
    ring = torch.randint(0, 64, (n,), generator=g).double()
    r = 2.0 + ring**1.6 * 0.6 + torch.rand(n, generator=g, dtype=torch.float64) * 0.05
    theta = torch.rand(n, generator=g, dtype=torch.float64) * 6.283
    z = -1.7 + ring * 0.03
    pts = torch.stack(
        [r * torch.cos(theta), r * torch.sin(theta), z, torch.rand(n, generator=g, dtype=torch.float64)], 1
    )
    return pts.to(dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("max_points,max_voxels", [(5, 40000), (1, 100), (35, 20000)])
def test_cuda_lidar_matches_cpu(dtype, max_points, max_voxels):
    points = lidar_cloud(60000, seed=1, dtype=dtype)
    voxel, rng = [0.05, 0.05, 0.1], [0, -40, -3, 70.4, 40, 1]
    cpu = hard_op(points, voxel, rng, max_points, max_voxels)
    gpu = hard_op(points.cuda(), voxel, rng, max_points, max_voxels)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(gpu, cpu))
    assert torch.equal(dynamic_op(points.cuda(), voxel, rng).cpu(), dynamic_op(points, voxel, rng))


@pytest.mark.cuda
def test_cuda_known_vector_and_nonfinite():
    points = torch.tensor(KNOWN_POINTS).cuda()
    assert dynamic_op(points, MMCV_VOXEL, MMCV_RANGE).tolist() == KNOWN_DYNAMIC
    assert hard_op(points, MMCV_VOXEL, MMCV_RANGE, 2, 20)[1].tolist() == [[0, 0, 0], [7, 80, 20], [6, 80, 140]]
