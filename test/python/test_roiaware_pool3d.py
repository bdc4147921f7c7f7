"""mmops.roiaware_pool3d: the conformance cases (max, avg), mmcv's published sums, a
float64 reference (voxels, the per-voxel cap, max / mean), gradcheck, the determinism of
the backward, ties, NaN, the mmcv.ops bridge and the CUDA tests (skipped without a GPU)."""

import math

import numpy as np
import pytest
import torch
from box3d_reference import random_boxes, roiaware_pool3d_reference
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL

import mmops

op = torch.ops.mmops.roiaware_pool3d
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def voxel_centred_points(rois, per_roi, out_size, *, seed, jitter=0.3, outside=0.25):
    """[K * per_roi, 3] float64 points at jittered voxel centres of each roi (jitter < 0.5
    voxel, so every dtype puts them in the same voxel), `outside` of them beyond the box."""
    g = torch.Generator().manual_seed(seed)
    pts = []
    for roi in rois.double():
        cells = torch.stack([torch.randint(0, o, (per_roi,), generator=g) for o in out_size], 1).double()
        u = cells + 0.5 + (torch.rand(per_roi, 3, generator=g, dtype=torch.float64) * 2 - 1) * jitter
        u = u / torch.tensor(out_size, dtype=torch.float64)  # in (0, 1) inside
        far = torch.rand(per_roi, generator=g) < outside
        u[far, 0] += 1.3
        lx, ly, lz = (u[:, 0] - 0.5) * roi[3], (u[:, 1] - 0.5) * roi[4], u[:, 2] * roi[5]
        c, s = torch.cos(roi[6]), torch.sin(roi[6])
        pts.append(torch.stack([roi[0] + lx * c - ly * s, roi[1] + lx * s + ly * c, roi[2] + lz], 1))
    pts = torch.cat(pts)
    return pts[torch.randperm(pts.shape[0], generator=g)]


def _inputs(k, per_roi, c, out_size, *, seed, dtype=torch.float64, device="cpu"):
    rois = random_boxes(1, k, seed=seed, extent=6.0)[0]
    pts = voxel_centred_points(rois, per_roi, out_size, seed=seed + 1)
    g = torch.Generator().manual_seed(seed + 2)
    feats = torch.randn(pts.shape[0], c, generator=g, dtype=torch.float64)
    return tuple(t.to(device=device, dtype=dtype) for t in (rois, pts, feats))


# ----------------------------------------------------------------------------- conformance


def _sample_of(mode):
    def sample(device, dtype, size):
        # no size of 3 or 7 in size 0: torch.compile would tie it to the static xyz / box columns
        # out_size and cap fixed: test_aoti exports one program for both sizes
        k, per_roi, c, out_size, cap = (2, 12, 4, [2, 3, 2], 5) if size == 0 else (4, 9, 5, [2, 3, 2], 5)
        return Sample((*_inputs(k, per_roi, c, out_size, seed=size, dtype=dtype, device=device), out_size, cap, mode))

    return sample


def _empty_of(mode):
    def empty(device, dtype):
        rois, pts, feats = _inputs(2, 6, 3, [2, 2, 2], seed=5, dtype=dtype, device=device)
        return [
            Sample((rois[:0], pts, feats, [2, 2, 2], 4, mode), out_shapes=[(0, 2, 2, 2, 3)]),
            Sample((rois, pts[:0], feats[:0], [2, 2, 2], 4, mode), out_shapes=[(2, 2, 2, 2, 3)]),
            Sample((rois, pts, feats[:, :0], [2, 2, 2], 4, mode), out_shapes=[(2, 2, 2, 2, 0)]),
        ]

    return empty


def _cuda_samples_of(mode):
    def samples(dtype):
        for k, per_roi, c, out_size, cap in (
            (1, 1, 1, [1, 1, 1], 2),
            (20, 300, 19, [4, 5, 3], 9),
            (5, 900, 3, [14, 14, 14], 128),
        ):
            rois, pts, feats = _inputs(k, per_roi, c, out_size, seed=per_roi)
            # distinct features: no max ties after rounding to 16 bits
            feats = (torch.randperm(feats.numel()).double().reshape(feats.shape) / 8 - 64).to(dtype)
            yield Sample((rois.to(dtype), pts.to(dtype), feats, out_size, cap, mode))

    return samples


def _cuda_tol(dtype, what, expected, sample):
    return (
        dict(rtol=0, atol=0)
        if dtype == torch.float64 or (what.startswith("output") and sample.args[-1] == "max")
        else TOL[dtype]
    )


class _PoolNet(torch.nn.Module):
    """roiaware_pool3d in a model: the module in both modes and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.max_pool = mmops.RoIAwarePool3d(out_size=2, max_pts_per_voxel=6, mode="max")
        self.avg_pool = mmops.RoIAwarePool3d(out_size=[1, 2, 3], max_pts_per_voxel=3, mode="avg")

    def forward(self, rois: torch.Tensor, pts: torch.Tensor, feats: torch.Tensor):
        pooled = self.max_pool(rois, pts, feats).sum((1, 2, 3)) + self.avg_pool(rois, pts, feats * 2.0).sum((1, 2, 3))
        return pooled, torch.ops.mmops.roiaware_pool3d(rois * 1.5, pts * 1.5, feats.sin(), [2, 1, 2], 4, "max")


def _helpers(sample):
    rois, pts, feats, out_size, cap, mode = sample.args
    fwd, bwd = torch.ops.mmops._roiaware_pool3d_forward, torch.ops.mmops._roiaware_pool3d_backward
    out, argmax, point_voxels, counts = fwd(*sample.args)
    return [(fwd, sample.args), (bwd, (torch.randn_like(out), argmax, point_voxels, counts, mode))]


def _message(text):
    return f"mmops::roiaware_pool3d: .*{text}"


_Z = torch.zeros


def _bad_inputs():
    return {
        "rois_6_cols": BadInput(
            lambda r, p, f, *o: (r[:, :6], p, f, *o), _message(r"rois to be a 2-D tensor of shape \[N, 7\]")
        ),
        "pts_2_cols": BadInput(
            lambda r, p, f, *o: (r, p[:, :2], f, *o), _message(r"pts to be a 2-D tensor of shape \[P, 3\]")
        ),
        "feature_rows": BadInput(lambda r, p, f, *o: (r, p, f[1:], *o), _message("one row per point"), meta=True),
        "feature_1d": BadInput(lambda r, p, f, *o: (r, p, f[:, 0], *o), _message("pts_feature to be a 2-D tensor")),
        "int_features": BadInput(
            lambda r, p, f, *o: (r.int(), p.int(), f.int(), *o), _message("floating point dtype, but got Int")
        ),
        "dtypes_differ": BadInput(
            lambda r, p, f, *o: (r.double(), p, f, *o), _message(r"the dtype of pts_feature \(Float\)")
        ),
        "out_size_2": BadInput(lambda r, p, f, s, c, m: (r, p, f, [2, 2], c, m), _message("out_size to hold 3 values")),
        "out_size_zero": BadInput(
            lambda r, p, f, s, c, m: (r, p, f, [2, 0, 2], c, m), _message(r"out_size values must be in \[1"), meta=True
        ),
        "max_pts_zero": BadInput(
            lambda r, p, f, s, c, m: (r, p, f, s, 0, m), _message(r"max_pts_per_voxel must be in \[1")
        ),
        "mode": BadInput(
            lambda r, p, f, s, c, m: (r, p, f, s, c, "sum"), _message(r'mode must be "max" or "avg", but got "sum"')
        ),
        "huge_output": BadInput(
            lambda r, p, f, s, c, m: (r, p, f, [2**20, 2**20, 2**20], c, m), _message("does not fit in int64|2\\^31")
        ),
        "rois_on_cpu": BadInput(
            lambda r, p, f, *o: (r, p.cuda(), f.cuda(), *o), _message("on the device of pts_feature"), cuda=True
        ),
    }


CONFORMANCE = [
    ConformanceCase(
        f"roiaware_pool3d_{mode}",
        op,
        _sample_of(mode),
        grad_args=(2,),
        empty=_empty_of(mode),
        module=_PoolNet if mode == "max" else None,
        helpers=_helpers,
        cuda_samples=_cuda_samples_of(mode),
        cuda_tol=_cuda_tol,
        bad_inputs=_bad_inputs() if mode == "max" else {},
    )
    for mode in ("max", "avg")
]


class TestRoIAwarePool3dConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- known vectors


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_mmcv_sums(dtype):
    # mmcv tests/test_ops/test_roiaware_pool3d.py
    rois = torch.tensor(
        [[1.0, 2.0, 3.0, 5.0, 4.0, 6.0, -0.3 - np.pi / 2], [-10.0, 23.0, 16.0, 20.0, 10.0, 20.0, -0.5 - np.pi / 2]],
        dtype=dtype,
    )
    pts = torch.tensor(
        [[1, 2, 3.3], [1.2, 2.5, 3.0], [0.8, 2.1, 3.5], [1.6, 2.6, 3.6], [0.8, 1.2, 3.9], [-9.2, 21.0, 18.2],
         [3.8, 7.9, 6.3], [4.7, 3.5, -12.2], [3.8, 7.6, -2], [-10.6, -12.9, -20], [-16, -18, 9],
         [-21.3, -52, -5], [0, 0, 0], [6, 7, 8], [-2, -3, -4]],
        dtype=dtype,
    )  # fmt: skip
    pooled_max = mmops.RoIAwarePool3d(out_size=4, max_pts_per_voxel=128, mode="max")(rois, pts, pts.clone())
    pooled_avg = mmops.RoIAwarePool3d(out_size=4, max_pts_per_voxel=128, mode="avg")(rois, pts, pts.clone())
    assert pooled_max.shape == (2, 4, 4, 4, 3) and pooled_avg.shape == (2, 4, 4, 4, 3)
    torch.testing.assert_close(pooled_max.sum().double(), torch.tensor(51.100, dtype=torch.float64), rtol=1e-3, atol=0)
    torch.testing.assert_close(pooled_avg.sum().double(), torch.tensor(49.750, dtype=torch.float64), rtol=1e-3, atol=0)


# ----------------------------------------------------------------------------- reference


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("out_size, cap", [([2, 3, 2], 3), ([3, 3, 3], 128), ([1, 4, 2], 2)])
def test_random_against_reference(mode, dtype, out_size, cap):
    rois, pts, feats = _inputs(5, 30, 4, out_size, seed=7)
    out = op(rois.to(dtype), pts.to(dtype), feats.to(dtype), out_size, cap, mode)
    expected = roiaware_pool3d_reference(rois, pts, feats.to(dtype), out_size, cap, mode)
    torch.testing.assert_close(
        out.double(), expected, **({} if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12))
    )
    assert (out != 0).sum() > out.numel() // 10  # not a vacuous comparison


def test_cap_keeps_the_first_points():
    """max_pts_per_voxel = 3 keeps the first 2 points of a voxel (mmcv's counter slot)."""
    roi = torch.tensor([[0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0]], dtype=torch.float64)
    pts = torch.tensor([[0.1, 0.1, 1.0], [0.2, 0.1, 1.0], [0.3, 0.1, 1.0], [0.4, 0.1, 1.0]], dtype=torch.float64)
    feats = torch.tensor([[1.0], [2.0], [5.0], [7.0]], dtype=torch.float64)
    assert op(roi, pts, feats, [1, 1, 1], 3, "max").item() == 2.0
    assert op(roi, pts, feats, [1, 1, 1], 3, "avg").item() == 1.5
    assert op(roi, pts, feats, [1, 1, 1], 1, "max").item() == 0.0  # keeps nothing
    assert op(roi, pts, feats, [1, 1, 1], 128, "avg").item() == 3.75


def test_voxel_clamp_and_zero_height():
    """A point on the top face lands in the last z voxel (clamped); a zero-height roi puts its
    points in z voxel 0."""
    roi = torch.tensor([[0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0], [0.0, 0.0, 1.0, 2.0, 2.0, 0.0, 0.0]], dtype=torch.float64)
    pts = torch.tensor([[0.5, 0.5, 2.0], [0.5, 0.5, 1.0], [-0.5, -0.5, 0.0]], dtype=torch.float64)
    feats = torch.tensor([[3.0], [4.0], [6.0]], dtype=torch.float64)
    out = op(roi, pts, feats, [2, 2, 2], 8, "avg")
    assert out[0, 1, 1, 1, 0] == 3.5 and out[0, 0, 0, 0, 0] == 6.0 and out[0].sum() == 9.5
    assert out[1, 1, 1, 0, 0] == 4.0 and out[1].sum() == 4.0


def test_max_ties_and_nan():
    """Ties: the lowest point index wins (and gets the gradient); NaN wins and sticks."""
    roi = torch.tensor([[0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0]], dtype=torch.float64)
    pts = torch.tensor([[0.1, 0.1, 1.0], [0.2, 0.1, 1.0], [0.3, 0.1, 1.0]], dtype=torch.float64)
    feats = torch.tensor([[5.0, 1.0], [5.0, math.nan], [2.0, 3.0]], dtype=torch.float64, requires_grad=True)
    out = op(roi, pts, feats, [1, 1, 1], 8, "max")
    assert out[0, 0, 0, 0, 0] == 5.0 and out[0, 0, 0, 0, 1].isnan()
    out.sum().backward()
    assert feats.grad.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]


def test_nonfinite_points_and_rois():
    roi = torch.tensor([[0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0], [0.0, 0.0, 0.0, math.inf, 2.0, 2.0, 0.0]])
    pts = torch.tensor([[0.5, 0.5, 1.0], [math.nan, 0.5, 1.0], [0.5, 0.5, math.inf]])
    feats = torch.tensor([[1.0], [10.0], [20.0]])
    out = op(roi, pts, feats, [1, 1, 1], 8, "avg")
    assert out.flatten().tolist() == [1.0, 0.0]


# ----------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_gradcheck(mode):
    rois, pts, feats = _inputs(4, 10, 3, [2, 2, 3], seed=11)
    feats = feats.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda f: op(rois, pts, f, [2, 2, 3], 4, mode), (feats,))


def test_overlapping_rois_sum_gradients():
    """A point in two rois receives both rois' gradients (avg: divided by each voxel's count)."""
    roi = torch.tensor([[0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0], [0.0, 0.0, 0.0, 4.0, 4.0, 4.0, 0.5]], dtype=torch.float64)
    pts = torch.tensor([[0.1, 0.1, 1.0], [0.2, 0.1, 1.0]], dtype=torch.float64)
    feats = torch.ones(2, 1, dtype=torch.float64, requires_grad=True)
    op(roi, pts, feats, [1, 1, 1], 8, "avg").sum().backward()
    assert feats.grad.flatten().tolist() == [1.0, 1.0]  # 1/2 from each roi


def test_backward_is_deterministic():
    rois, pts, feats = _inputs(30, 40, 8, [3, 3, 3], seed=12)
    rois[:, 3:6] *= 3  # overlapping rois: many points in several
    feats = feats.float().requires_grad_(True)
    grads = []
    for _ in range(2):
        out = op(rois.float(), pts.float(), feats, [3, 3, 3], 16, "avg")
        (grad,) = torch.autograd.grad(out, feats, torch.randn(out.shape, generator=torch.Generator().manual_seed(0)))
        grads.append(grad)
    assert torch.equal(grads[0], grads[1])


def test_double_backward_refused():
    rois, pts, feats = _inputs(2, 5, 2, [1, 1, 1], seed=13)
    feats = feats.requires_grad_(True)
    out = op(rois, pts, feats, [1, 1, 1], 8, "avg")
    grad_out = torch.ones_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(out, feats, grad_out, create_graph=True)


def test_backward_rejects_bad_point_voxels():
    rois, pts, feats = _inputs(2, 5, 2, [1, 1, 1], seed=14)
    out, argmax, point_voxels, counts = torch.ops.mmops._roiaware_pool3d_forward(rois, pts, feats, [1, 1, 1], 8, "max")
    bad = point_voxels.clone()
    bad[0, 0] = 5
    with pytest.raises(RuntimeError, match=r"point_voxels in \[-1, 1\)"):
        torch.ops.mmops._roiaware_pool3d_backward(torch.ones_like(out), argmax, bad, counts, "max")


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    rois, pts, feats = _inputs(3, 20, 4, [2, 2, 2], seed=15, dtype=torch.float32)
    for mode in ("max", "avg"):
        f1 = feats.clone().requires_grad_(True)
        f2 = feats.clone().requires_grad_(True)
        out = mmcv_ops.RoIAwarePool3d(out_size=2, max_pts_per_voxel=5, mode=mode)(rois, pts, f1)
        ref = op(rois, pts, f2, [2, 2, 2], 5, mode)
        assert torch.equal(out, ref)
        out.sum().backward()
        ref.sum().backward()
        assert torch.equal(f1.grad, f2.grad)


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_large(mode, dtype):
    rois, pts, feats = _inputs(64, 250, 16, [14, 14, 14], seed=16)
    rois[:, 3:6] *= 2  # overlaps
    feats = (torch.randperm(feats.numel()).double().reshape(feats.shape) / 64 - 500).to(dtype)
    r, p = rois.to(dtype), pts.to(dtype)
    fc = feats.cuda().requires_grad_(True)
    f = feats.clone().requires_grad_(True)
    out_cuda = op(r.cuda(), p.cuda(), fc, [14, 14, 14], 128, mode)
    out = op(r, p, f, [14, 14, 14], 128, mode)
    tol = dict(rtol=0, atol=0) if mode == "max" or dtype == torch.float64 else TOL[dtype]
    torch.testing.assert_close(out_cuda.cpu(), out, **tol)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    out_cuda.backward(g.cuda())
    out.backward(g)
    torch.testing.assert_close(
        fc.grad.cpu(), f.grad, **(dict(rtol=0, atol=0) if dtype == torch.float64 else TOL[dtype])
    )


@pytest.mark.cuda
def test_cuda_strict_index_check():
    from conftest import strict_index_check

    rois, pts, feats = _inputs(2, 5, 2, [1, 1, 1], seed=17, device="cuda")
    out, argmax, point_voxels, counts = torch.ops.mmops._roiaware_pool3d_forward(rois, pts, feats, [1, 1, 1], 8, "max")
    bad = point_voxels.clone()
    bad[0, 0] = 5
    # guarded in the kernel: the bad entry is skipped
    torch.ops.mmops._roiaware_pool3d_backward(torch.ones_like(out), argmax, bad, counts, "max")
    with strict_index_check(True), pytest.raises(RuntimeError, match=r"point_voxels in \[-1, 1\)"):
        torch.ops.mmops._roiaware_pool3d_backward(torch.ones_like(out), argmax, bad, counts, "max")


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("out_size, cap", [([3, 2, 2], 40), ([20, 18, 16], 3)])
def test_cuda_matches_cpu_crowded(mode, out_size, cap):
    """Thousands of points in a roi (several chunks of the CUDA kernel's test step and
    several stages of its in-box rank walk), voxels far over their cap, an empty roi, and
    (20 x 18 x 16) a grid too large for the kernel's shared-memory voxel tables: every
    forward output and the gradient bitwise."""
    rois, pts, feats = _inputs(1, 9000, 6, out_size, seed=21, dtype=torch.float32)
    rois = rois.repeat(4, 1)
    rois[2, 3:6] *= 0.5  # fewer points
    rois[3, :2] += 100.0  # none
    fwd, bwd = torch.ops.mmops._roiaware_pool3d_forward, torch.ops.mmops._roiaware_pool3d_backward
    ref = fwd(rois, pts, feats, out_size, cap, mode)
    got = fwd(rois.cuda(), pts.cuda(), feats.cuda(), out_size, cap, mode)
    for name, a, b in zip(("output", "argmax", "point_voxels", "voxel_counts"), got, ref):
        assert torch.equal(a.cpu(), b), name
    inside = torch.ops.mmops.points_in_boxes_all(pts[None], rois[None])[0].sum(0)
    assert inside[0] > 4096 and inside[3] == 0 and ref[3][0].eq(cap - 1).any() and ref[3][0].sum() < inside[0]
    g = torch.randn(ref[0].shape, generator=torch.Generator().manual_seed(2))
    grad = bwd(g, *ref[1:], mode)
    assert torch.equal(bwd(g.cuda(), *(t.cuda() for t in got[1:]), mode).cpu(), grad)
