"""mmops dynamic_scatter (mmcv's DynamicScatter): the conformance cases (a voxel encoder,
dynamic voxelization then dynamic_scatter, among them: scripted here and run from C++),
then the references of voxelization_reference.py, gradcheck, ties / NaN / dropped rows,
the wrappers and module, the mmcv.ops bridge and the CUDA-specific tests."""

import importlib
import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL
from test_voxelization import RANGE, VOXEL, random_cloud
from voxelization_reference import dynamic_scatter_grad_ref, dynamic_scatter_ref

import mmops

scatter_op = torch.ops.mmops.dynamic_scatter
REDUCES = ["sum", "mean", "max"]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def random_coors(n, *, columns=3, high=4, seed=0, device="cpu", dropped=0.15):
    """int32 coordinates in [0, high) with about `dropped` of the rows holding a -1."""
    g = torch.Generator().manual_seed(seed)
    coors = torch.randint(0, high, (n, columns), generator=g, dtype=torch.int32)
    drop = torch.rand(n, generator=g) < dropped
    coors[drop, torch.randint(0, columns, (n,), generator=g)[drop]] = -1
    return coors.to(device)


def random_feats(n, c, *, seed=0, dtype=torch.float32, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, c, generator=g, dtype=torch.float64) * 3).to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------- conformance


class VoxelEncoder(torch.nn.Module):
    """A dynamic voxel feature encoder (as mmdet3d's DynamicVFE): the voxel of every point,
    the mean point of every voxel, per-point features max-pooled per voxel."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.point_layer = torch.nn.Linear(4, 8)
        self.mean_layer = torch.nn.Linear(4, 8)

    def forward(self, points: torch.Tensor):
        coors = torch.ops.mmops.dynamic_voxelize(points, [1.0, 1.0, 0.5], [0.0, -4.0, -1.0, 4.0, 4.0, 1.0])
        mean, voxel_coors = torch.ops.mmops.dynamic_scatter(points, coors, "mean")
        pooled, pooled_coors = torch.ops.mmops.dynamic_scatter(torch.relu(self.point_layer(points)), coors, "max")
        return pooled + self.mean_layer(mean), voxel_coors, pooled_coors


class _Scatter(torch.nn.Module):
    def forward(self, feats: torch.Tensor, coors: torch.Tensor):
        out, voxel_coors = torch.ops.mmops.dynamic_scatter(feats * 2.0, coors, "sum")
        return out + 1.0, voxel_coors


def _sample(reduce):
    def sample(device, dtype, size):
        n, c = (50, 4) if size == 0 else (80, 5)  # c != 3 columns of coors (no duck sizing)
        feats = random_feats(n, c, seed=size, dtype=dtype, device=device)
        return Sample((feats, random_coors(n, seed=size, device=device), reduce))

    return sample


def _empty(reduce):
    """No point, and every row dropped."""

    def empty(device, dtype):
        feats = torch.zeros(0, 3, dtype=dtype, device=device)
        no_points = torch.zeros(0, 3, dtype=torch.int32, device=device)
        dropped = torch.full((6, 4), -1, dtype=torch.int32, device=device)
        return [
            Sample((feats, no_points, reduce), out_shapes=[(0, 3), (0, 3)]),
            Sample((random_feats(6, 3, dtype=dtype, device=device), dropped, reduce), out_shapes=[(0, 3), (0, 4)]),
        ]

    return empty


def _helpers(sample):
    feats, coors, reduce = sample.args
    fwd = torch.ops.mmops._dynamic_scatter_forward(feats, coors, reduce)
    grad = torch.randn_like(fwd[0])
    return [
        (torch.ops.mmops._dynamic_scatter_forward, (feats, coors, reduce)),
        (torch.ops.mmops._dynamic_scatter_backward, (grad, fwd[2], fwd[3], fwd[4], reduce)),
    ]


def _cuda_samples(reduce):
    def samples(dtype):
        for n, columns, high in ((1, 3, 4), (255, 3, 4), (257, 4, 6), (5000, 3, 20), (3000, 1, 1 << 30), (2000, 5, 3)):
            yield Sample(
                (random_feats(n, 7, seed=n, dtype=dtype), random_coors(n, columns=columns, high=high, seed=n), reduce)
            )

    return samples


def _tol(dtype, what, expected, sample):
    # float16 / bfloat16 sums: one rounding of the float sum (both devices add in the same order)
    return dict(rtol=0, atol=0) if dtype in (torch.float32, torch.float64) else TOL[dtype]


_Z = torch.zeros
_I = torch.int32
BAD = {
    "feats_1d": BadInput(lambda *_: (_Z(3), _Z(3, 3, dtype=_I), "sum"), r"feats to be a 2-D tensor of shape \[N, C\]"),
    "feats_int": BadInput(
        lambda *_: (_Z(3, 2, dtype=_I), _Z(3, 3, dtype=_I), "sum"), "feats to have a floating point dtype"
    ),
    "coors_float": BadInput(
        lambda *_: (_Z(3, 2), _Z(3, 3), "sum"), r"coors to have dtype int32 \(Int\), but got Float"
    ),
    "coors_rows": BadInput(
        lambda *_: (_Z(3, 2), _Z(4, 3, dtype=_I), "sum"),
        r"coors to be a 2-D tensor of shape \[N, D\] with N = feats.size\(0\) = 3",
    ),
    "coors_no_column": BadInput(lambda *_: (_Z(3, 2), _Z(3, 0, dtype=_I), "sum"), "coors to have at least one column"),
    "reduce": BadInput(
        lambda *_: (_Z(3, 2), _Z(3, 3, dtype=_I), "min"), 'reduce must be "sum", "mean" or "max", but got "min"'
    ),
    "coors_on_cpu": BadInput(
        lambda *_: (_Z(3, 2, device="cuda"), _Z(3, 3, dtype=_I), "sum"), "coors on the device of feats", cuda=True
    ),
}

CONFORMANCE = [
    ConformanceCase(
        f"dynamic_scatter_{reduce}",
        scatter_op,
        _sample(reduce),
        dtypes=DTYPES,
        grad_args=(0,),
        data_dependent=True,
        empty=_empty(reduce),
        helpers=_helpers,
        module=_Scatter if reduce == "sum" else None,
        cuda_samples=_cuda_samples(reduce),
        cuda_tol=_tol,
        bad_inputs=BAD if reduce == "max" else {},
        compile_tol=dict(rtol=1e-5, atol=1e-5),
    )
    for reduce in REDUCES
] + [
    ConformanceCase(
        "voxel_encoder",
        torch.ops.mmops.dynamic_voxelize,
        lambda device, dtype, size: Sample(
            (random_cloud(60 + 30 * size, seed=size, dtype=dtype, device=device), VOXEL, RANGE)
        ),
        dtypes=(),  # the ops' own cases compare CUDA with CPU per dtype
        grad_args=(0,),
        module=VoxelEncoder,
        # torch.compile of the ops is covered by the dynamic_scatter_sum case (inductor takes
        # about a minute on this encoder on 2 cores)
        module_tests=("export", "torchscript"),
    )
]


class TestDynamicScatterConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- references


def _ref_tol(dtype):
    return dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else TOL[dtype]


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,columns,high", [(1, 3, 4), (60, 1, 5), (200, 2, 6), (300, 3, 5), (150, 4, 3), (100, 5, 2)])
def test_matches_reference(reduce, dtype, n, columns, high):
    feats = random_feats(n, 4, seed=n, dtype=dtype)
    coors = random_coors(n, columns=columns, high=high, seed=n + columns)
    out, out_coors = scatter_op(feats, coors, reduce)
    ref, ref_coors = dynamic_scatter_ref(feats, coors, reduce)
    assert out.dtype == dtype and out_coors.dtype == torch.int32
    assert torch.equal(out_coors, ref_coors)
    torch.testing.assert_close(out.double(), ref, **_ref_tol(dtype))


def test_large_coordinates_keep_lexicographic_order():
    """Coordinates up to 2^31 - 1 in every column (two 31-bit columns share one sort key)."""
    big = 2**31 - 1
    coors = torch.tensor(
        [[big, 0, 5], [0, big, 5], [big, 0, 4], [0, big, 5], [1, 1, big], [0, 0, 0]], dtype=torch.int32
    )
    feats = torch.arange(6.0).unsqueeze(1)
    out, out_coors = scatter_op(feats, coors, "sum")
    assert out_coors.tolist() == [[0, 0, 0], [0, big, 5], [1, 1, big], [big, 0, 4], [big, 0, 5]]
    assert out.flatten().tolist() == [5.0, 4.0, 4.0, 2.0, 0.0]


def test_known_vector():
    feats = torch.tensor([[1.0, -2.0], [3.0, 4.0], [5.0, 0.0], [7.0, 8.0], [-1.0, 6.0]])
    coors = torch.tensor([[0, 1, 2], [0, 0, 1], [0, 1, 2], [-1, 0, 0], [0, 0, 1]], dtype=torch.int32)
    for reduce, expected in (
        ("sum", [[2.0, 10.0], [6.0, -2.0]]),
        ("mean", [[1.0, 5.0], [3.0, -1.0]]),
        ("max", [[3.0, 6.0], [5.0, 0.0]]),
    ):
        out, out_coors = mmops.dynamic_scatter(feats, coors, reduce)
        assert out_coors.tolist() == [[0, 0, 1], [0, 1, 2]]  # sorted; the row with -1 dropped
        assert out.tolist() == expected, reduce


@pytest.mark.parametrize("reduce", REDUCES)
def test_gradcheck(reduce):
    feats = random_feats(30, 3, seed=4, dtype=torch.float64).requires_grad_(True)
    coors = random_coors(30, high=3, seed=5)
    assert torch.autograd.gradcheck(lambda f: scatter_op(f, coors, reduce)[0], (feats,))


@pytest.mark.parametrize("reduce", REDUCES)
def test_gradient_matches_reference_with_ties(reduce):
    feats = torch.tensor([[1.0, 2.0], [1.0, 5.0], [0.5, 5.0], [2.0, 2.0], [9.0, 9.0]], dtype=torch.float64)
    coors = torch.tensor([[1, 1], [1, 1], [1, 1], [0, 3], [-1, 3]], dtype=torch.int32)
    leaf = feats.clone().requires_grad_(True)
    out, _ = scatter_op(leaf, coors, reduce)
    grad_out = torch.tensor([[1.5, -2.0], [0.25, 3.0]], dtype=torch.float64)
    out.backward(grad_out)
    expected = dynamic_scatter_grad_ref(feats, coors, reduce, grad_out)
    torch.testing.assert_close(leaf.grad, expected, rtol=0, atol=0)
    if reduce == "max":  # ties go to the lowest index: point 0 (channel 0), point 1 (channel 1)
        assert leaf.grad[:3].tolist() == [[0.25, 0.0], [0.0, 3.0], [0.0, 0.0]]


def test_max_propagates_nan_and_inf():
    nan, inf = float("nan"), float("inf")
    feats = torch.tensor([[1.0, -inf], [nan, -inf], [nan, 2.0], [inf, 0.0]]).requires_grad_(True)
    coors = torch.zeros(4, 3, dtype=torch.int32)
    out, _ = scatter_op(feats, coors, "max")
    assert math.isnan(out[0, 0].item()) and out[0, 1].item() == 2.0
    out.backward(torch.ones_like(out))
    assert feats.grad.tolist() == [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]  # the first NaN wins
    torch.testing.assert_close(out, dynamic_scatter_ref(feats, coors, "max")[0].float(), equal_nan=True)


@pytest.mark.parametrize("reduce", REDUCES)
def test_all_rows_dropped_gives_empty_and_zero_grads(reduce):
    feats = random_feats(20, 3).requires_grad_(True)
    coors = torch.full((20, 3), -1, dtype=torch.int32)
    out, out_coors = scatter_op(feats, coors, reduce)
    assert out.shape == (0, 3) and out_coors.shape == (0, 3)
    out.sum().backward()
    assert torch.equal(feats.grad, torch.zeros_like(feats))


def test_zero_channels():
    out, out_coors = scatter_op(torch.zeros(4, 0), torch.tensor([[0], [1], [0], [2]], dtype=torch.int32), "max")
    assert out.shape == (3, 0) and out_coors.flatten().tolist() == [0, 1, 2]


def test_strided_inputs():
    feats = random_feats(40, 6, seed=2)[:, ::2]
    coors = random_coors(40, columns=6, seed=3)[:, ::2]
    for reduce in REDUCES:
        a, b = scatter_op(feats, coors, reduce), scatter_op(feats.contiguous(), coors.contiguous(), reduce)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_backward_validates_indices_on_cpu():
    feats, coors = random_feats(10, 2), random_coors(10, high=2, dropped=0)
    out, _, p2v, count, argmax = torch.ops.mmops._dynamic_scatter_forward(feats, coors, "max")
    grad = torch.ones_like(out)
    with pytest.raises(RuntimeError, match=r"point2voxel values in \[-1, M = "):
        torch.ops.mmops._dynamic_scatter_backward(grad, p2v + 100, count, argmax, "max")
    with pytest.raises(RuntimeError, match=r"argmax values in \[0, N = 10\)"):
        torch.ops.mmops._dynamic_scatter_backward(grad, p2v, count, argmax - 50, "max")
    with pytest.raises(RuntimeError, match=r"argmax to be a 2-D tensor \[0, 2\]"):
        torch.ops.mmops._dynamic_scatter_backward(grad, p2v, count, argmax, "sum")


def test_deterministic():
    feats, coors = random_feats(500, 4, seed=1), random_coors(500, high=3, seed=1)
    first = scatter_op(feats, coors, "mean")
    assert all(torch.equal(a, b) for a, b in zip(first, scatter_op(feats, coors, "mean")))


# ----------------------------------------------------------------------------- module, encoder, bridge


def per_batch_loop(layer, feats, coors):
    """mmcv's DynamicScatter.forward for [N, 4] coors: one call per batch index."""
    voxels, voxel_coors = [], []
    for i in range(int(coors[-1, 0]) + 1):
        mask = coors[:, 0] == i
        v, c = layer.forward_single(feats[mask], coors[mask][:, 1:])
        voxels.append(v)
        voxel_coors.append(torch.nn.functional.pad(c, (1, 0), value=i))
    return torch.cat(voxels), torch.cat(voxel_coors)


@pytest.mark.parametrize("average", [True, False])
def test_module_batched_equals_per_batch_loop(average):
    layer = mmops.DynamicScatter(VOXEL, RANGE, average)
    feats = random_feats(120, 4, seed=6)
    coors = random_coors(120, columns=3, seed=6)
    batched = torch.cat([torch.arange(120).div(40, rounding_mode="floor").unsqueeze(1).int(), coors], 1)
    got, exp = layer(feats, batched), per_batch_loop(layer, feats, batched)
    assert torch.equal(got[1], exp[1]) and torch.equal(got[0], exp[0])
    scripted = torch.jit.script(layer)
    assert all(torch.equal(a, b) for a, b in zip(scripted(feats, batched), got))


def test_voxel_encoder_against_reference():
    encoder = VoxelEncoder().double()
    points = random_cloud(80, seed=3, dtype=torch.float64)
    out, voxel_coors, pooled_coors = encoder(points)
    from voxelization_reference import dynamic_voxelize_ref

    coors = dynamic_voxelize_ref(points, VOXEL, RANGE)
    mean, ref_coors = dynamic_scatter_ref(points, coors, "mean")
    pooled, _ = dynamic_scatter_ref(torch.relu(encoder.point_layer(points)), coors, "max")
    torch.testing.assert_close(out, pooled + encoder.mean_layer(mean), rtol=1e-12, atol=1e-12)
    assert torch.equal(voxel_coors, ref_coors) and torch.equal(pooled_coors, ref_coors)


def test_mmcv_bridge_dynamic_scatter():
    pytest.importorskip("mmcv")
    importlib.import_module("mmops.mmcv_ops")  # first: routes mmcv's Functions to mmops
    from mmcv.ops import DynamicScatter

    feats = random_feats(90, 3, seed=7).requires_grad_(True)
    coors = random_coors(90, seed=7)
    out, out_coors = DynamicScatter(VOXEL, RANGE, True)(feats, coors)
    ref, ref_coors = dynamic_scatter_ref(feats, coors, "mean")
    assert torch.equal(out_coors, ref_coors)
    torch.testing.assert_close(out.double(), ref, **TOL[torch.float32])
    out.sum().backward()
    assert feats.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_large(reduce, dtype):
    feats = random_feats(200000, 4, seed=1, dtype=dtype)
    coors = random_coors(200000, high=40, seed=2)
    cpu_leaf, gpu_leaf = feats.clone().requires_grad_(True), feats.cuda().requires_grad_(True)
    cpu, gpu = scatter_op(cpu_leaf, coors, reduce), scatter_op(gpu_leaf, coors.cuda(), reduce)
    assert torch.equal(gpu[1].cpu(), cpu[1])
    torch.testing.assert_close(gpu[0].cpu(), cpu[0], **_tol(dtype, "", None, None))
    grad = random_feats(cpu[0].shape[0], 4, seed=3, dtype=dtype)
    cpu[0].backward(grad)
    gpu[0].backward(grad.cuda())
    torch.testing.assert_close(gpu_leaf.grad.cpu(), cpu_leaf.grad, **_tol(dtype, "", None, None))


@pytest.mark.cuda
@pytest.mark.parametrize("columns,high", [(3, 2**20), (2, 2**31 - 1), (3, 2**31 - 1), (9, 3)])
def test_cuda_grouping_matches_cpu_for_any_key_width(columns, high):
    """CUDA packs a row into one key of the columns' bits (60 and 62 bits here) and
    groups rows too wide for it (93 bits, 9 columns) with the CPU's sorts."""
    coors = random_coors(3000, columns=columns, high=high, seed=5)
    coors = torch.cat([coors, coors[:1500]])  # voxels of several points
    feats = random_feats(coors.shape[0], 3, seed=6)
    cpu = torch.ops.mmops._dynamic_scatter_forward(feats, coors, "max")
    gpu = torch.ops.mmops._dynamic_scatter_forward(feats.cuda(), coors.cuda(), "max")
    for got, expected in zip(gpu, cpu):
        assert torch.equal(got.cpu(), expected)


def _assert_cuda_forward_equals_cpu(feats, coors, reduce):
    cpu = torch.ops.mmops._dynamic_scatter_forward(feats, coors, reduce)
    gpu = torch.ops.mmops._dynamic_scatter_forward(feats.cuda(), coors.cuda(), reduce)
    for got, expected in zip(gpu, cpu):
        assert got.shape == expected.shape and torch.equal(got.cpu(), expected)


@pytest.mark.cuda
@pytest.mark.parametrize("columns", [2, 4])
def test_cuda_key_widths_from_earlier_calls(columns):
    """CUDA packs rows with the column widths of earlier calls (no sync for the maxima):
    wider data redoes the grouping with its own widths, narrower data reuses wider keys;
    every call equals the CPU. 4 columns and 2^k - 1 / 2^k values cross the widths."""
    highs = [1, 4, 2**10, 2**10 + 1, 5, 2**20, 2**14, 2**31 - 1 if columns == 2 else 2**15, 3]
    for step, high in enumerate(highs):
        coors = random_coors(4000, columns=columns, high=high, seed=20 + step)
        coors = torch.cat([coors, coors[:2000]])  # voxels of several points
        feats = random_feats(coors.shape[0], 3, seed=step)
        _assert_cuda_forward_equals_cpu(feats, coors, REDUCES[step % 3])


@pytest.mark.cuda
def test_cuda_key_of_31_and_32_bits():
    """31 bits of coordinates and the dropped mark fill a 32-bit key; one more bit takes 64-bit keys."""
    for high in (2**31 - 1, 2**16):
        columns = 1 if high > 2**16 else 2
        coors = random_coors(3000, columns=columns, high=high, seed=7)
        coors[:5] = high - 1  # the largest value: its width is the column's
        coors = torch.cat([coors, coors[:1000]])
        _assert_cuda_forward_equals_cpu(random_feats(coors.shape[0], 2, seed=8), coors, "max")


@pytest.mark.cuda
@pytest.mark.parametrize("reduce", REDUCES)
def test_cuda_zero_channels_and_all_dropped(reduce):
    coors = random_coors(500, columns=4, high=3, seed=9)
    _assert_cuda_forward_equals_cpu(torch.zeros(500, 0), coors, reduce)
    _assert_cuda_forward_equals_cpu(random_feats(500, 3), torch.full((500, 4), -1, dtype=torch.int32), reduce)
    single = torch.zeros(1, 4, dtype=torch.int32)
    _assert_cuda_forward_equals_cpu(random_feats(1, 3), single, reduce)


@pytest.mark.cuda
def test_cuda_lidar_like_batch_matches_cpu():
    """The benchmark's shape: 4 clouds of (batch, z, y, x) rows, a third of them dropped, mean
    reduce, forward and backward bit for bit."""
    clouds = [random_cloud(20000, seed=s) for s in range(4)]
    coors = torch.cat(
        [
            torch.cat([torch.full((c.shape[0], 1), i, dtype=torch.int32), mmops.dynamic_voxelize(c, VOXEL, RANGE)], 1)
            for i, c in enumerate(clouds)
        ]
    )
    coors[coors[:, 1] < 0] = -1
    feats = torch.cat(clouds)
    _assert_cuda_forward_equals_cpu(feats, coors, "mean")
    cpu_leaf, gpu_leaf = feats.clone().requires_grad_(True), feats.cuda().requires_grad_(True)
    cpu, gpu = scatter_op(cpu_leaf, coors, "mean"), scatter_op(gpu_leaf, coors.cuda(), "mean")
    grad = random_feats(cpu[0].shape[0], feats.shape[1], seed=4)
    cpu[0].backward(grad)
    gpu[0].backward(grad.cuda())
    assert torch.equal(gpu_leaf.grad.cpu(), cpu_leaf.grad)


@pytest.mark.cuda
def test_cuda_backward_guards_bad_indices_without_strict_mode():
    feats, coors = random_feats(10, 2, device="cuda"), random_coors(10, high=2, dropped=0, device="cuda")
    out, _, p2v, count, argmax = torch.ops.mmops._dynamic_scatter_forward(feats, coors, "mean")
    grad = torch.ones_like(out)
    bad = p2v.clone()
    bad[0] = 1000  # treated as dropped: gradient 0, no out-of-bounds read
    g = torch.ops.mmops._dynamic_scatter_backward(grad, bad, count, argmax, "mean")
    assert g[0].abs().sum().item() == 0


@pytest.mark.cuda
def test_cuda_strict_mode_validates_backward_indices():
    from conftest import strict_index_check

    feats, coors = random_feats(10, 2, device="cuda"), random_coors(10, high=2, dropped=0, device="cuda")
    out, _, p2v, count, argmax = torch.ops.mmops._dynamic_scatter_forward(feats, coors, "max")
    with strict_index_check(True), pytest.raises(RuntimeError, match=r"point2voxel values in \[-1, M = "):
        torch.ops.mmops._dynamic_scatter_backward(torch.ones_like(out), p2v + 100, count, argmax, "max")


def test_autocast_runs_in_float32():
    feats, coors = random_feats(40, 3, seed=9).bfloat16(), random_coors(40, seed=9)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, out_coors = scatter_op(feats, coors, "mean")
        voxels = torch.ops.mmops.hard_voxelize(random_cloud(30).bfloat16(), VOXEL, RANGE, 3, 40)[0]
    expected, expected_coors = scatter_op(feats.float(), coors, "mean")
    assert out.dtype == torch.bfloat16 and torch.equal(out_coors, expected_coors)
    assert torch.equal(out, expected.bfloat16())
    assert voxels.dtype == torch.bfloat16
