"""Tests of mmops::chamfer_distance: the conformance cases, then the references,
mmcv's known behaviour, gradcheck, ties, NaN, determinism, the CUDA guard and the
mmcv bridge."""

import importlib

import pytest
import torch
from chamfer_distance_reference import chamfer_dist_of, chamfer_distance_ref, nearest_loops
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, strict_index_check

import mmops

op = torch.ops.mmops.chamfer_distance
backward_op = torch.ops.mmops._chamfer_distance_backward


def random_points(B, N, M, generator, dtype=torch.float64, scale=10.0):
    xyz1 = (torch.rand(B, N, 2, dtype=torch.float64, generator=generator) * 2 - 1) * scale
    xyz2 = (torch.rand(B, M, 2, dtype=torch.float64, generator=generator) * 2 - 1) * scale
    return xyz1.to(dtype), xyz2.to(dtype)


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    B, N, M = (3, 9, 6) if size == 0 else (4, 7, 11)  # no size 2: the coordinate dim is 2
    xyz1, xyz2 = random_points(B, N, M, torch.Generator().manual_seed(60 + size), dtype)
    return Sample((xyz1.to(device), xyz2.to(device)))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample((torch.randn(0, 4, 2, **f), torch.randn(0, 3, 2, **f)), out_shapes=[(0, 4), (0, 3), (0, 4), (0, 3)]),
        Sample((torch.randn(2, 0, 2, **f), torch.randn(2, 0, 2, **f)), out_shapes=[(2, 0), (2, 0), (2, 0), (2, 0)]),
    ]


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.chamfer = mmops.ChamferDistance()

    def forward(self, xyz1: torch.Tensor, xyz2: torch.Tensor):
        d1, d2, i1, i2 = self.chamfer(xyz1 * 2.0, xyz2)
        e1, e2, _, _ = mmops.chamfer_distance(xyz1, xyz2)
        f1, f2, j1, j2 = torch.ops.mmops.chamfer_distance(xyz2, xyz1 * 0.5)
        return (d1 + 1.0).log() + e1, d2 + e2.sin() + f1 + i2 + j1, f2, i1, j2


def _helpers(sample):
    xyz1, xyz2 = sample.args
    d1, d2, i1, i2 = op(xyz1, xyz2)
    return [(backward_op, (xyz1, xyz2, i1, i2, torch.randn_like(d1), torch.randn_like(d2)))]


def _message(text):
    return f"mmops::chamfer_distance: .*{text}"


CONFORMANCE = [
    ConformanceCase(
        "chamfer_distance",
        op,
        _sample,
        grad_args=(0, 1),
        nonzero_grads=True,
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        bad_inputs={
            "xyz1_2d": BadInput(lambda a, b: (a[0], b), _message("xyz1 to be a 3-D"), meta=True),
            "xyz2_4d": BadInput(lambda a, b: (a, b[None]), _message("xyz2 to be a 3-D"), meta=True),
            "xyz1_3d_points": BadInput(
                lambda a, b: (torch.cat([a, a[..., :1]], -1), b), _message("xyz1 to hold 2-D points"), meta=True
            ),
            "int_xyz1": BadInput(lambda a, b: (a.int(), b.int()), _message("floating point"), meta=True),
            "dtype_mismatch": BadInput(
                lambda a, b: (a, b.double()), _message("xyz2 to have the dtype of xyz1"), meta=True
            ),
            "batch_mismatch": BadInput(lambda a, b: (a, b[1:]), _message("batch size of xyz1"), meta=True),
            "one_side_empty": BadInput(lambda a, b: (a, b[:, :0]), _message("both empty or both non-empty"), meta=True),
        },
    ),
]


class TestChamferDistanceConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def fwd_bwd(xyz1, xyz2, g1, g2):
    a, b = xyz1.detach().requires_grad_(True), xyz2.detach().requires_grad_(True)
    d1, d2, i1, i2 = op(a, b)
    ga, gb = torch.autograd.grad([d1, d2], [a, b], [g1, g2])
    return (d1.detach(), d2.detach(), i1, i2), (ga, gb)


def ref_grads(xyz1, xyz2, i1, i2, g1, g2):
    a, b = xyz1.detach().double().requires_grad_(True), xyz2.detach().double().requires_grad_(True)
    d1, d2 = chamfer_dist_of(a, b, i1, i2)
    return torch.autograd.grad([d1, d2], [a, b], [g1.double(), g2.double()])


SHAPES = [(1, 1, 1), (2, 30, 17), (3, 5, 64), (1, 200, 3)]  # B, N, M


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_matches_reference(dtype):
    """Distances and indices equal the reference computed in the same dtype (compute dtype float
    for 16-bit); gradients equal the float64 gradient of the distances to the chosen points."""
    g = torch.Generator().manual_seed(1)
    for B, N, M in SHAPES:
        xyz1, xyz2 = random_points(B, N, M, g, dtype)
        g1 = torch.randn(B, N, generator=g).to(dtype)
        g2 = torch.randn(B, M, generator=g).to(dtype)
        (d1, d2, i1, i2), (ga, gb) = fwd_bwd(xyz1, xyz2, g1, g2)
        compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
        e1, e2, j1, j2 = chamfer_distance_ref(xyz1.to(compute), xyz2.to(compute))
        assert i1.dtype == torch.int32 and d1.dtype == dtype and d1.shape == (B, N) and d2.shape == (B, M)
        assert torch.equal(i1, j1) and torch.equal(i2, j2)
        torch.testing.assert_close(d1, e1.to(dtype), rtol=0, atol=0)
        torch.testing.assert_close(d2, e2.to(dtype), rtol=0, atol=0)
        ra, rb = ref_grads(xyz1, xyz2, i1, i2, g1, g2)
        torch.testing.assert_close(ga.double(), ra, **TOL[dtype])
        torch.testing.assert_close(gb.double(), rb, **TOL[dtype])


def test_distances_are_the_minimum_float64():
    """Independent of the index: each distance is the float64 minimum over the other set."""
    xyz1, xyz2 = random_points(2, 40, 25, torch.Generator().manual_seed(2))
    d1, d2, _, _ = op(xyz1, xyz2)
    full = torch.cdist(xyz1, xyz2) ** 2
    torch.testing.assert_close(d1, full.amin(2))
    torch.testing.assert_close(d2, full.amin(1))


def test_gradcheck():
    xyz1, xyz2 = random_points(2, 6, 5, torch.Generator().manual_seed(3))
    args = (xyz1.requires_grad_(True), xyz2.requires_grad_(True))
    assert torch.autograd.gradcheck(lambda a, b: op(a, b)[:2], args)
    assert torch.autograd.gradcheck(lambda a, b: op(a, b)[0], args)  # dist2 unused: its gradient is absent


def test_ties_take_the_lowest_index():
    """Duplicate points and equidistant points: the lowest index wins."""
    xyz1 = torch.tensor([[[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]]])
    xyz2 = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [1.0, 1.0], [1.0, 1.0]]])
    d1, d2, i1, i2 = op(xyz1, xyz2)
    assert i1.tolist() == [[0, 3, 3]]
    torch.testing.assert_close(d1, torch.tensor([[1.0, 0.0, 32.0]]))
    assert i2.tolist() == [[0, 0, 0, 1, 1]]  # (1, 0) is 1 from both 0 and 1: index 0


def test_nan_and_inf_rules():
    """A NaN distance loses to every number (even +inf); all NaN: distance NaN, index 0."""
    nan, inf = float("nan"), float("inf")
    xyz1 = torch.tensor([[[0.0, 0.0], [nan, 0.0], [inf, 0.0]]])
    xyz2 = torch.tensor([[[nan, nan], [3.0, 4.0], [inf, 1.0], [1.0, 0.0]]])
    d1, d2, i1, i2 = op(xyz1, xyz2)
    for i in range(3):
        want_d, want_i = nearest_loops(xyz1[0, i].tolist(), xyz2[0].tolist())
        assert int(i1[0, i]) == want_i
        torch.testing.assert_close(d1[0, i], torch.tensor(want_d), equal_nan=True)
    for j in range(4):
        want_d, want_i = nearest_loops(xyz2[0, j].tolist(), xyz1[0].tolist())
        assert int(i2[0, j]) == want_i
        torch.testing.assert_close(d2[0, j], torch.tensor(want_d), equal_nan=True)
    assert i1.tolist() == [[3, 0, 1]] and torch.isnan(d1[0, 1])  # (inf, 0): inf to (3, 4), NaN to (inf, 1)
    assert i2.tolist() == [[0, 0, 0, 0]] and torch.isnan(d2[0, 0])


def test_loops_reference_on_random_inputs():
    xyz1, xyz2 = random_points(1, 12, 9, torch.Generator().manual_seed(4), scale=2.0)
    xyz1 = xyz1.round(decimals=0)  # many ties
    xyz2 = xyz2.round(decimals=0)
    _, _, i1, i2 = op(xyz1, xyz2)
    assert i1[0].tolist() == [nearest_loops(q, xyz2[0].tolist())[1] for q in xyz1[0].tolist()]
    assert i2[0].tolist() == [nearest_loops(q, xyz1[0].tolist())[1] for q in xyz2[0].tolist()]


def test_mmcv_reference_loop():
    """mmcv's test: uniform points in [-10, 10), N = M = 600 (here 60): its golden loop keeps
    the first strictly smaller distance, as ours."""
    xyz1, xyz2 = random_points(2, 60, 60, torch.Generator().manual_seed(5), torch.float32)
    d1, d2, i1, i2 = op(xyz1, xyz2)
    for b in range(2):
        for n in range(60):
            want_d, want_i = nearest_loops(xyz1[b, n].double().tolist(), xyz2[b].double().tolist())
            assert abs(float(d1[b, n]) - want_d) <= 1e-3 * abs(want_d) + 1e-4
            dist_to_chosen = ((xyz1[b, n].double() - xyz2[b, int(i1[b, n])].double()) ** 2).sum()
            assert abs(float(dist_to_chosen) - want_d) <= 1e-4


def test_strided_inputs():
    xyz1, xyz2 = random_points(2, 12, 9, torch.Generator().manual_seed(6), torch.float32)
    a = xyz1.transpose(0, 1).contiguous().transpose(0, 1)
    b = torch.stack([xyz2[..., 0], xyz2[..., 1]], 0).permute(1, 2, 0)
    for x, y in zip(op(a, b), op(xyz1, xyz2)):
        assert torch.equal(x, y)


def test_deterministic_backward():
    xyz1, xyz2 = random_points(2, 300, 40, torch.Generator().manual_seed(7), torch.float32)
    g1, g2 = torch.randn(2, 300), torch.randn(2, 40)
    runs = [fwd_bwd(xyz1, xyz2, g1, g2)[1] for _ in range(3)]
    assert all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r))


def test_backward_rejects_bad_indices():
    xyz1, xyz2 = random_points(1, 4, 3, torch.Generator().manual_seed(8))
    d1, d2, i1, i2 = op(xyz1, xyz2)
    bad = i1.clone()
    bad[0, 2] = 3
    with pytest.raises(RuntimeError, match=r"every value of idx1 in \[0, 3\).*got values in \[0, 3\]"):
        backward_op(xyz1, xyz2, bad, i2, d1, d2)
    with pytest.raises(RuntimeError, match="idx2 to have dtype int32"):
        backward_op(xyz1, xyz2, i1, i2.long(), d1, d2)
    with pytest.raises(RuntimeError, match=r"grad_dist1 of shape \[1, 4\]"):
        backward_op(xyz1, xyz2, i1, i2, d1[:, :2], d2)


def test_autocast_runs_in_float32():
    xyz1, xyz2 = random_points(2, 10, 7, torch.Generator().manual_seed(9), torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(xyz1.bfloat16(), xyz2)
    want = op(xyz1.bfloat16().float(), xyz2)
    assert out[0].dtype == torch.bfloat16
    assert torch.equal(out[2], want[2]) and torch.equal(out[0], want[0].bfloat16())


def test_double_backward_refused():
    xyz1, xyz2 = random_points(1, 4, 3, torch.Generator().manual_seed(10))
    xyz1.requires_grad_(True)
    go = torch.randn(1, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(xyz1, xyz2)[0], xyz1, go, create_graph=True)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_cuda_matches_cpu(dtype):
    """Several shared-memory tiles (M > 512), ragged tails, many ties (integer grid)."""
    g = torch.Generator().manual_seed(11)
    for B, N, M, scale in ((2, 1100, 700, 10.0), (3, 257, 1, 1.0), (1, 513, 1025, 4.0)):
        xyz1, xyz2 = random_points(B, N, M, g, dtype, scale)
        if scale == 4.0:
            xyz1, xyz2 = xyz1.round(), xyz2.round()
        g1, g2 = torch.randn(B, N, generator=g).to(dtype), torch.randn(B, M, generator=g).to(dtype)
        out, grads = fwd_bwd(xyz1, xyz2, g1, g2)
        out_c, grads_c = fwd_bwd(xyz1.cuda(), xyz2.cuda(), g1.cuda(), g2.cuda())
        for a, b in zip(out_c, out):
            assert torch.equal(a.cpu(), b)
        for a, b in zip(grads_c, grads):
            torch.testing.assert_close(a.cpu(), b, **TOL[dtype])


@pytest.mark.cuda
def test_cuda_deterministic_bitwise():
    xyz1, xyz2 = random_points(4, 2048, 64, torch.Generator().manual_seed(12), torch.float32)
    g1, g2 = torch.randn(4, 2048).cuda(), torch.randn(4, 64).cuda()
    runs = [fwd_bwd(xyz1.cuda(), xyz2.cuda(), g1, g2)[1] for _ in range(3)]
    assert all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r))


@pytest.mark.cuda
def test_cuda_backward_guards_indices():
    """Unchecked CUDA: an index outside the other set adds no pair; the strict switch raises."""
    xyz1, xyz2 = random_points(1, 5, 4, torch.Generator().manual_seed(13))
    d1, d2, i1, i2 = op(xyz1, xyz2)
    bad1, bad2 = i1.clone(), i2.clone()
    bad1[0, 1], bad2[0, 2] = -1, 5
    g1, g2 = torch.ones_like(d1), torch.ones_like(d2)
    ga, gb = backward_op(*(t.cuda() for t in (xyz1, xyz2, bad1, bad2, g1, g2)))
    keep1, keep2 = torch.ones_like(g1), torch.ones_like(g2)
    keep1[0, 1], keep2[0, 2] = 0, 0
    ra, rb = backward_op(xyz1, xyz2, i1, i2, g1 * keep1, g2 * keep2)  # the dropped pairs weigh 0
    torch.testing.assert_close(ga.cpu(), ra)
    torch.testing.assert_close(gb.cpu(), rb)
    with strict_index_check(True), pytest.raises(RuntimeError, match="every value of idx1"):
        backward_op(*(t.cuda() for t in (xyz1, xyz2, bad1, bad2, g1, g2)))


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.chamfer_distance")
    xyz1, xyz2 = random_points(2, 20, 20, torch.Generator().manual_seed(14), torch.float32)
    want = op(xyz1, xyz2)
    for fn in (ops.chamfer_distance, module.ChamferDistanceFunction.apply):
        a, b = xyz1.clone().requires_grad_(True), xyz2.clone().requires_grad_(True)
        got = fn(a, b)
        for x, y in zip(got, want):
            assert torch.equal(x, y)
        (got[0].sum() + got[1].sum()).backward()
        ra, rb = ref_grads(xyz1, xyz2, want[2], want[3], torch.ones(2, 20), torch.ones(2, 20))
        torch.testing.assert_close(a.grad.double(), ra, **TOL[torch.float32])
        torch.testing.assert_close(b.grad.double(), rb, **TOL[torch.float32])
    outs = [
        torch.zeros(2, 20),
        torch.zeros(2, 20),
        torch.zeros(2, 20, dtype=torch.int32),
        torch.zeros(2, 20, dtype=torch.int32),
    ]
    module.ext_module.chamfer_distance_forward(xyz1, xyz2, *outs)
    for x, y in zip(outs, want):
        assert torch.equal(x, y)
    ga, gb = torch.zeros_like(xyz1), torch.zeros_like(xyz2)
    module.ext_module.chamfer_distance_backward(
        xyz1, xyz2, want[2], want[3], torch.ones(2, 20), torch.ones(2, 20), ga, gb
    )
    ra, rb = backward_op(xyz1, xyz2, want[2], want[3], torch.ones(2, 20), torch.ones(2, 20))
    assert torch.equal(ga, ra) and torch.equal(gb, rb)
