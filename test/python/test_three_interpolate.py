"""mmops.three_interpolate: the conformance case, mmcv's published vectors, the float64
reference (forward and both gradients), gradcheck, repeated and out-of-range indices,
determinism, NaN weights, the mmcv.ops bridge and the CUDA-specific tests (skipped
without a GPU)."""

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, strict_index_check
from neighbors_reference import three_interpolate_ref

import mmops

op = torch.ops.mmops.three_interpolate
backward_op = torch.ops.mmops._three_interpolate_backward
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def random_inputs(b, c, m, n, *, dtype=torch.float64, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(b, c, m, generator=g, dtype=torch.float64)
    indices = torch.randint(0, m, (b, n, 3), generator=g, dtype=torch.int32) if m else torch.zeros(b, n, 3).int()
    weight = torch.rand(b, n, 3, generator=g, dtype=torch.float64)
    weight = weight / weight.sum(-1, keepdim=True)
    return features.to(dtype=dtype, device=device), indices.to(device), weight.to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    return Sample(random_inputs(*((2, 5, 7, 9) if size == 0 else (3, 4, 6, 11)), dtype=dtype, seed=size, device=device))


def _empty(device, dtype):
    return [
        Sample(random_inputs(2, 0, 5, 4, dtype=dtype, device=device), out_shapes=[(2, 0, 4)]),
        Sample(random_inputs(2, 3, 5, 0, dtype=dtype, device=device), out_shapes=[(2, 3, 0)]),
        Sample(random_inputs(0, 3, 5, 4, dtype=dtype, device=device), out_shapes=[(0, 3, 4)]),
    ]


def _cuda_samples(dtype):
    for shape in ((1, 1, 1, 1), (2, 64, 300, 1000), (3, 7, 5, 600)):  # the last: heavily repeated sources
        yield Sample(random_inputs(*shape, dtype=dtype, seed=sum(shape)))


def _tolerance(dtype, what, expected, sample):
    # the same float products summed in the same order on both devices (float32: exact up
    # to sqrt/rounding of the libraries; 16-bit: one final rounding)
    return dict(rtol=0, atol=0) if dtype in (torch.float32, torch.float64) else TOL[dtype]


def _grad_output(features, indices, weight):
    b, c, n = features.shape[0], features.shape[1], indices.shape[1]
    return torch.randn(b, c, n, dtype=features.dtype).to(features.device)


class _Propagate(torch.nn.Module):
    """three_interpolate as PointNet++'s feature propagation uses it."""

    def forward(self, features: torch.Tensor, indices: torch.Tensor, weight: torch.Tensor):
        return mmops.three_interpolate(features, indices, weight), op(features * 2.0, indices, weight.flip(-1))


_I = lambda *s: torch.zeros(*s, dtype=torch.int32)  # noqa: E731
CONFORMANCE = [
    ConformanceCase(
        "three_interpolate",
        op,
        _sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        grad_args=(0, 2),
        empty=_empty,
        module=_Propagate,
        helpers=lambda s: [(backward_op, (_grad_output(*s.args), *s.args))],
        cuda_samples=_cuda_samples,
        cuda_tol=_tolerance,
        nonzero_grads=True,
        bad_inputs={
            "features_2d": BadInput(lambda f, i, w: (f[0], i, w), r"features to be a 3-D tensor \[B, C, M\]"),
            "int_features": BadInput(lambda f, i, w: (f.int(), i, w), "features to have a floating point dtype"),
            "indices_4_cols": BadInput(
                lambda f, i, w: (f, _I(2, 9, 4), w), r"indices to be a 3-D tensor of shape \[B, N, 3\]", meta=True
            ),
            "int64_indices": BadInput(lambda f, i, w: (f, i.long(), w), "expected indices to be int32, but got Long"),
            "batches_differ": BadInput(
                lambda f, i, w: (f, i[:1], w[:1]), r"indices to have the batch size of features \(2\)", meta=True
            ),
            "weight_shape": BadInput(
                lambda f, i, w: (f, i, w[:, :4]), r"weight to have the shape of indices \(\[2, 9, 3\]\)", meta=True
            ),
            "weight_dtype": BadInput(
                lambda f, i, w: (f, i, w.float()), r"weight to have the dtype of features \(Double\), but got Float"
            ),
            "index_out_of_range": BadInput(
                lambda f, i, w: (f, torch.where(i == i.max(), 7, i).int(), w),
                r"indices must lie in \[0, M\) with M = features.size\(2\) = 7, but indices\[\d+, \d+, \d+\] = 7",
            ),
            "negative_index": BadInput(
                lambda f, i, w: (f, torch.full_like(i, -2), w),
                r"indices must lie in \[0, M\) .*, but indices\[0, 0, 0\] = -2",
            ),
            "indices_on_cuda": BadInput(
                lambda f, i, w: (f, i.cuda(), w), "indices and weight on the device", cuda=True
            ),
        },
    )
]


class TestThreeInterpolateConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


def test_mmcv_vectors():
    # mmcv tests/test_ops/test_three_interpolate.py
    features = torch.tensor([[[2.4350, 4.7516, 4.4995, 2.4350, 2.4350, 2.4350],
                              [3.1236, 2.6278, 3.0447, 3.1236, 3.1236, 3.1236],
                              [2.6732, 2.8677, 2.6436, 2.6732, 2.6732, 2.6732],
                              [0.0124, 7.0150, 7.0199, 0.0124, 0.0124, 0.0124],
                              [0.3207, 0.0000, 0.3411, 0.3207, 0.3207, 0.3207]],
                             [[0.0000, 0.9544, 2.4532, 0.0000, 0.0000, 0.0000],
                              [0.5346, 1.9176, 1.4715, 0.5346, 0.5346, 0.5346],
                              [0.0000, 0.2744, 2.0842, 0.0000, 0.0000, 0.0000],
                              [0.3414, 1.5063, 1.6209, 0.3414, 0.3414, 0.3414],
                              [0.5814, 0.0103, 0.0000, 0.5814, 0.5814, 0.5814]]])  # fmt: skip
    idx = torch.tensor([[[0, 1, 2], [2, 3, 4], [2, 3, 4], [0, 1, 2], [0, 1, 2], [0, 1, 3]],
                        [[0, 2, 3], [1, 3, 4], [2, 1, 4], [0, 2, 4], [0, 2, 4], [0, 1, 2]]]).int()  # fmt: skip
    third = [3.3333e-01] * 3
    small = [[1.0, 5.8155e-08, 2.2373e-08], [1.0, 1.7737e-08, 1.7356e-08]], [[1.0, 1.3651e-08, 7.7312e-09],
                                                                           [1.0, 1.7148e-08, 1.4070e-08]]  # fmt: skip
    weight = torch.tensor([[third, *small[b], third, third, third] for b in range(2)])
    expected = torch.tensor([[[3.8953e+00, 4.4995e+00, 4.4995e+00, 3.8953e+00, 3.8953e+00, 3.2072e+00],
                              [2.9320e+00, 3.0447e+00, 3.0447e+00, 2.9320e+00, 2.9320e+00, 2.9583e+00],
                              [2.7281e+00, 2.6436e+00, 2.6436e+00, 2.7281e+00, 2.7281e+00, 2.7380e+00],
                              [4.6824e+00, 7.0199e+00, 7.0199e+00, 4.6824e+00, 4.6824e+00, 2.3466e+00],
                              [2.2060e-01, 3.4110e-01, 3.4110e-01, 2.2060e-01, 2.2060e-01, 2.1380e-01]],
                             [[8.1773e-01, 9.5440e-01, 2.4532e+00, 8.1773e-01, 8.1773e-01, 1.1359e+00],
                              [8.4689e-01, 1.9176e+00, 1.4715e+00, 8.4689e-01, 8.4689e-01, 1.3079e+00],
                              [6.9473e-01, 2.7440e-01, 2.0842e+00, 6.9473e-01, 6.9473e-01, 7.8619e-01],
                              [7.6789e-01, 1.5063e+00, 1.6209e+00, 7.6789e-01, 7.6789e-01, 1.1562e+00],
                              [3.8760e-01, 1.0300e-02, 8.3569e-09, 3.8760e-01, 3.8760e-01, 1.9723e-01]]])  # fmt: skip
    assert torch.allclose(mmops.three_interpolate(features, idx, weight), expected, 1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_and_gradients_against_reference(dtype):
    f, i, w = random_inputs(2, 6, 10, 25, dtype=dtype, seed=1)
    tol = dict(rtol=0, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-6)
    f, w = f.requires_grad_(True), w.requires_grad_(True)
    out = op(f, i, w)
    fr, wr = f.detach().double().requires_grad_(True), w.detach().double().requires_grad_(True)
    ref = three_interpolate_ref(fr, i, wr)
    torch.testing.assert_close(out.double(), ref, **tol)
    cot = torch.randn(out.shape, dtype=torch.float64)
    gf, gw = torch.autograd.grad(out, (f, w), cot.to(dtype))
    rgf, rgw = torch.autograd.grad(ref, (fr, wr), cot)
    torch.testing.assert_close(gf.double(), rgf, **tol)
    torch.testing.assert_close(gw.double(), rgw, **tol)


def test_gradcheck():
    f, i, w = random_inputs(2, 3, 5, 6, seed=2)
    i[0, 0] = torch.tensor([1, 1, 1], dtype=torch.int32)  # a repeated source within one target
    assert torch.autograd.gradcheck(
        lambda f, w: op(f, i, w), (f.requires_grad_(True), w.requires_grad_(True)), check_backward_ad=True
    )


def test_backward_is_deterministic_and_order_fixed():
    """grad_features sums every target of a source in (n, j) order: equal to a float64
    reference rounded once (no atomics), identical across runs."""
    f, i, w = random_inputs(1, 4, 3, 500, dtype=torch.float32, seed=3)  # ~500 entries per source
    f.requires_grad_(True)
    cot = torch.randn(1, 4, 500)
    grads = [torch.autograd.grad(op(f, i, w), f, cot)[0] for _ in range(3)]
    assert torch.equal(grads[0], grads[1]) and torch.equal(grads[0], grads[2])
    sequential = torch.zeros(1, 4, 3)
    for n in range(500):
        for j in range(3):
            sequential[0, :, i[0, n, j]] += cot[0, :, n] * w[0, n, j]
    assert torch.equal(grads[0], sequential)


def test_nan_weight_propagates():
    f, i, w = random_inputs(1, 2, 4, 3, seed=4)
    w[0, 1, 2] = float("nan")
    out = op(f, i, w)
    assert out[:, :, 1].isnan().all() and not out[:, :, [0, 2]].isnan().any()


def test_strided_inputs():
    f, i, w = random_inputs(2, 5, 8, 7, seed=5)
    expected = op(f, i, w)
    assert torch.equal(op(f.transpose(1, 2).contiguous().transpose(1, 2), i.flip(0).flip(0), w[..., None][..., 0]),
                       expected)  # fmt: skip
    wide = torch.zeros(2, 7, 6, dtype=torch.float64)
    wide[..., ::2] = w
    assert torch.equal(op(f, i, wide[..., ::2]), expected)


def test_double_backward_refused():
    f, i, w = random_inputs(1, 2, 4, 3, seed=6)
    out = op(f.requires_grad_(True), i, w)
    cot = torch.ones_like(out).requires_grad_(True)
    with pytest.raises(RuntimeError, match="mmops::three_interpolate: double backward is not implemented"):
        torch.autograd.grad(out, f, cot, create_graph=True)


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    import mmops.mmcv_ops  # noqa: F401  (first: it serves mmcv._ext)

    mmcv_ops = pytest.importorskip("mmcv.ops")
    f, i, w = random_inputs(2, 4, 6, 9, dtype=torch.float32, seed=7)
    f.requires_grad_(True)
    out = mmcv_ops.three_interpolate(f, i, w)
    assert torch.equal(out, op(f, i, w))
    (g,) = torch.autograd.grad(out.sum(), f)
    assert torch.equal(g, torch.autograd.grad(op(f, i, w).sum(), f)[0])


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu_feature_propagation(dtype):
    f, i, w = random_inputs(4, 128, 1024, 4096, dtype=dtype, seed=8)
    cot = torch.randn(4, 128, 4096, dtype=dtype)
    fc, wc = f.cuda().requires_grad_(True), w.cuda().requires_grad_(True)
    fh, wh = f.clone().requires_grad_(True), w.clone().requires_grad_(True)
    out_c, out_h = op(fc, i.cuda(), wc), op(fh, i, wh)
    tol = dict(rtol=0, atol=0) if dtype in (torch.float32, torch.float64) else TOL[dtype]
    torch.testing.assert_close(out_c.cpu(), out_h, **tol)
    for gc, gh in zip(torch.autograd.grad(out_c, (fc, wc), cot.cuda()), torch.autograd.grad(out_h, (fh, wh), cot)):
        torch.testing.assert_close(gc.cpu(), gh, **tol)


@pytest.mark.cuda
def test_cuda_out_of_range_indices_are_guarded():
    f, i, w = random_inputs(1, 3, 5, 4, seed=9, device="cuda")
    bad = i.clone()
    bad[0, 0, 1] = 99
    bad[0, 1, 0] = -3
    out = op(f, bad, w)
    expected = three_interpolate_ref(f.cpu(), torch.where((bad < 0) | (bad >= 5), 0, bad).cpu(),
                                     torch.where((bad < 0) | (bad >= 5), 0, 1).cpu() * w.cpu())  # fmt: skip
    torch.testing.assert_close(out.cpu(), expected)
    with strict_index_check(True), pytest.raises(RuntimeError, match=r"indices must lie in \[0, M\)"):
        op(f, bad, w)
