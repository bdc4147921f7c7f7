"""mmops.bbox_overlaps: the conformance cases, then a float64 reference written here,
mmcv's published vectors, torchvision's box_iou, gradcheck, degenerate boxes and the
CUDA-specific test (skipped without a GPU)."""

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import requires_torchvision

import mmops

op = torch.ops.mmops.bbox_overlaps

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def overlaps_ref(b1, b2, mode="iou", aligned=False, offset=0):
    """Differentiable float64-friendly reference with mmops' defined results:
    base = max(union or area1, offset), 0 where base <= 0 or a box is not finite."""
    if not aligned:
        b1, b2 = b1[:, None, :], b2[None, :, :]
    area1 = (b1[..., 2] - b1[..., 0] + offset) * (b1[..., 3] - b1[..., 1] + offset)
    area2 = (b2[..., 2] - b2[..., 0] + offset) * (b2[..., 3] - b2[..., 1] + offset)
    w = (torch.minimum(b1[..., 2], b2[..., 2]) - torch.maximum(b1[..., 0], b2[..., 0]) + offset).clamp(min=0)
    h = (torch.minimum(b1[..., 3], b2[..., 3]) - torch.maximum(b1[..., 1], b2[..., 1]) + offset).clamp(min=0)
    inter = w * h
    base = area1 if mode == "iof" else area1 + area2 - inter
    base = torch.maximum(base, torch.full_like(base, float(offset)))
    ok = (base > 0) & torch.isfinite(b1).all(-1) & torch.isfinite(b2).all(-1)
    safe = torch.where(ok, base, torch.ones_like(base))
    return torch.where(ok, inter / safe, torch.zeros_like(base))


def random_boxes(n, *, dtype=torch.float64, seed=0, image=50.0, side=25.0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g, dtype=torch.float64) * image
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * side + 0.5
    return torch.cat([xy, xy + wh], 1).to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------- conformance


def _sample(mode, aligned, offset):
    """7 bboxes1 and 9 bboxes2 (7 when aligned); size 1: 5 and 11 (5)."""

    def sample(device, dtype, size):
        m, n = (7, 9) if size == 0 else (5, 11)
        b1 = random_boxes(m, dtype=dtype, seed=13 + size, device=device)
        b2 = random_boxes(m if aligned else n, dtype=dtype, seed=14 + size, device=device)
        return Sample((b1, b2, mode, aligned, offset))

    return sample


def _empty(mode, aligned, offset):
    def empty(device, dtype):
        e, a = torch.zeros(0, 4, dtype=dtype, device=device), random_boxes(4, dtype=dtype, seed=3, device=device)
        if aligned:
            return [Sample((e, e, mode, True, offset), out_shapes=[(0,)])]
        return [
            Sample((e, a, mode, False, offset), out_shapes=[(0, 4)]),
            Sample((a, e, mode, False, offset), out_shapes=[(4, 0)]),
        ]

    return empty


def _cuda_samples(aligned):
    def samples(dtype):
        for mode in ("iou", "iof"):
            for offset in (0, 1):
                for m, n in ((0, 5), (1, 1), (33, 65), (300, 1000)):
                    b1 = random_boxes(m, dtype=dtype, seed=m, image=200.0, side=60.0)
                    b2 = random_boxes(n, dtype=dtype, seed=n + 1, image=200.0, side=60.0)
                    yield Sample((b1, b2[:m] if aligned else b2, mode, aligned, offset))

    return samples


def _cuda_tol(dtype, what, expected, sample):
    """10x the CPU tolerance; all-pairs gradients (accumulated in float / double on both
    devices) sum a term per box of bboxes2."""
    b1, b2, mode, aligned, offset = sample.args
    scale = 1.0 if what.startswith("output") or aligned else 1.0 + max(len(b2), 1)
    return dict(rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10 * scale)


def _helpers(sample):
    b1, b2, _, aligned, _ = sample.args
    go = torch.randn_like(op(b1, b2, "iou", aligned, 0))
    return [(torch.ops.mmops._bbox_overlaps_backward, (go, b1, b2, "iou", aligned, 0))]


class _IoUNet(torch.nn.Module):
    """bbox_overlaps in a model: an IoU loss, the functional wrapper and the op."""

    def forward(self, b1: torch.Tensor, b2: torch.Tensor):
        loss = (1 - op(b1 * 1.0, b2, "iou", False, 0)).pow(2).sum() + op(b1, b1, "iof", True, 0).sum()
        net = mmops.bbox_overlaps(b1, b2, "iou", False, 0) + torch.ops.mmops.bbox_overlaps(b1, b2, "iof", False, 1)
        return loss, net


def _case(name, mode, aligned, offset, **more):
    """A float64 case of op(bboxes1, bboxes2, mode, aligned, offset), gradients to both box sets."""
    return ConformanceCase(
        name,
        op,
        _sample(mode, aligned, offset),
        dtype=torch.float64,
        dtypes=DTYPES,
        grad_args=(0, 1),
        empty=_empty(mode, aligned, offset),
        helpers=_helpers,
        cuda_samples=_cuda_samples(aligned),
        cuda_tol=_cuda_tol,
        **more,
    )


_Z = torch.zeros
CONFORMANCE = [
    _case(
        "bbox_overlaps_iof_offset1",
        "iof",
        False,
        1,
        module=_IoUNet,
        compile_tol=dict(rtol=1e-7, atol=1e-7),
        bad_inputs={
            "bboxes1_5_cols": BadInput(
                lambda *_: (_Z(3, 5), _Z(2, 4)), r"bboxes1 to be a 2-D tensor of shape \[M, 4\]"
            ),
            "bboxes2_1d": BadInput(lambda *_: (_Z(3, 4), _Z(4)), r"bboxes2 to be a 2-D tensor of shape \[N, 4\]"),
            "int_boxes": BadInput(
                lambda *_: (_Z(3, 4, dtype=torch.int32), _Z(2, 4, dtype=torch.int32)),
                "floating point dtype, but got Int",
            ),
            "dtypes_differ": BadInput(
                lambda *_: (_Z(3, 4), _Z(2, 4, dtype=torch.float64)),
                r"bboxes2 to have the dtype of bboxes1 \(Float\), but got Double",
            ),
            "mode": BadInput(lambda *_: (_Z(3, 4), _Z(2, 4), "giou"), 'mode must be "iou" or "iof", but got "giou"'),
            "offset": BadInput(lambda *_: (_Z(3, 4), _Z(2, 4), "iou", False, 2), "offset must be 0 or 1, but got 2"),
            "aligned_counts": BadInput(
                lambda *_: (_Z(3, 4), _Z(2, 4), "iou", True),
                "aligned=True needs as many bboxes1 as bboxes2, but got 3 and 2",
            ),
            "bboxes2_on_cpu": BadInput(
                lambda *_: (_Z(3, 4, device="cuda"), _Z(2, 4)), "bboxes2 on the device of bboxes1", cuda=True
            ),
        },
    ),
    _case("bbox_overlaps_iof_offset1_aligned", "iof", True, 1),
]


class TestBBoxOverlapsConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- known vectors


@pytest.mark.parametrize("dtype", DTYPES)
def test_mmcv_vectors(dtype):
    # mmcv tests/test_ops/test_bbox.py
    b1 = torch.tensor([[1.0, 1.0, 3.0, 4.0], [2.0, 2.0, 3.0, 4.0], [7.0, 7.0, 8.0, 8.0]], dtype=dtype)
    b2 = torch.tensor([[0.0, 2.0, 2.0, 5.0], [2.0, 1.0, 3.0, 3.0]], dtype=dtype)
    tol = dict(rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(
        mmops.bbox_overlaps(b1, b2, offset=1).double(),
        torch.tensor([[0.33333334, 0.5], [0.2, 0.5], [0.0, 0.0]], dtype=torch.float64),
        **tol,
    )
    torch.testing.assert_close(
        mmops.bbox_overlaps(b1[:2], b2, aligned=True, offset=1).double(),
        torch.tensor([0.33333334, 0.5], dtype=torch.float64),
        **tol,
    )
    b1 = torch.tensor([[0.0, 0.0, 3.0, 3.0]], dtype=dtype)
    b2 = torch.tensor(
        [[4.0, 0.0, 5.0, 3.0], [3.0, 0.0, 4.0, 3.0], [2.0, 0.0, 3.0, 3.0], [1.0, 0.0, 2.0, 3.0]], dtype=dtype
    )
    torch.testing.assert_close(
        mmops.bbox_overlaps(b1, b2, offset=1).double(), torch.tensor([[0.0, 0.2, 0.5, 0.5]], dtype=torch.float64), **tol
    )


def test_exact_values():
    a = torch.tensor([[0.0, 0.0, 2.0, 2.0]], dtype=torch.float64)
    b = torch.tensor([[1.0, 1.0, 3.0, 3.0], [0.0, 0.0, 1.0, 1.0], [5.0, 5.0, 6.0, 6.0]], dtype=torch.float64)
    assert op(a, b).tolist() == [[1 / 7, 0.25, 0.0]]
    assert op(a, b, "iof").tolist() == [[0.25, 0.25, 0.0]]
    assert op(b, a, "iof").tolist() == [[0.25], [1.0], [0.0]]


# ----------------------------------------------------------------------------- random vs reference


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["iou", "iof"])
@pytest.mark.parametrize("offset", [0, 1])
def test_random(dtype, mode, offset):
    b1 = random_boxes(37, dtype=dtype, seed=1)
    b2 = random_boxes(53, dtype=dtype, seed=2)
    out = op(b1, b2, mode, False, offset)
    assert out.shape == (37, 53) and out.dtype == dtype
    torch.testing.assert_close(
        out.double(), overlaps_ref(b1.double(), b2.double(), mode, False, offset), rtol=TOL[dtype], atol=TOL[dtype]
    )
    out = op(b1, b2[:37], mode, True, offset)
    assert out.shape == (37,)
    torch.testing.assert_close(
        out.double(), overlaps_ref(b1.double(), b2[:37].double(), mode, True, offset), rtol=TOL[dtype], atol=TOL[dtype]
    )


@requires_torchvision
def test_torchvision_box_iou():
    import torchvision

    b1 = random_boxes(40, dtype=torch.float32, seed=3)
    b2 = random_boxes(70, dtype=torch.float32, seed=4)
    torch.testing.assert_close(op(b1, b2), torchvision.ops.box_iou(b1, b2), rtol=1e-6, atol=1e-6)


def test_degenerate_and_nonfinite():
    a = torch.tensor(
        [[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, float("nan"), 2.0], [0.0, 0.0, float("inf"), 2.0], [0.0, 0.0, 2.0, 2.0]]
    )
    out = op(a, a)
    exp = torch.zeros(4, 4)
    exp[3, 3] = 1.0
    assert torch.equal(out, exp)  # zero area: 0 (mmcv: 0/0 = NaN); NaN/Inf box: 0
    assert torch.equal(op(a, a, "iof"), exp)
    assert torch.equal(op(a, a, aligned=True), torch.tensor([0.0, 0.0, 0.0, 1.0]))
    # offset 1 gives a point box an area of 1
    assert op(a[:1], a[:1], offset=1).item() == 1.0
    # reversed boxes: negative area, no intersection
    r = torch.tensor([[2.0, 2.0, 0.0, 0.0]])
    torch.testing.assert_close(op(r, a[3:]), overlaps_ref(r, a[3:]))


def test_strided_inputs():
    b1 = random_boxes(20, seed=5)
    b2 = random_boxes(30, seed=6)
    wide = torch.zeros(20, 8, dtype=torch.float64)
    wide[:, 1::2] = b1
    torch.testing.assert_close(op(wide[:, 1::2], b2.t().contiguous().t()), op(b1, b2), rtol=0, atol=0)


# ----------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("mode", ["iou", "iof"])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("offset", [0, 1])
def test_gradcheck(mode, aligned, offset):
    b1 = random_boxes(6, seed=7, image=10.0, side=8.0).requires_grad_(True)
    b2 = random_boxes(6 if aligned else 5, seed=8, image=10.0, side=8.0).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x, y: op(x, y, mode, aligned, offset), (b1, b2))


@pytest.mark.parametrize("mode", ["iou", "iof"])
def test_gradient_matches_reference_autograd(mode):
    b1 = random_boxes(25, seed=9, image=20.0).requires_grad_(True)
    b2 = random_boxes(31, seed=10, image=20.0).requires_grad_(True)
    go = torch.randn(25, 31, dtype=torch.float64)
    g = torch.autograd.grad(op(b1, b2, mode), (b1, b2), go)
    e = torch.autograd.grad(overlaps_ref(b1, b2, mode), (b1, b2), go)
    for x, y in zip(g, e):
        torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-10)


def test_double_backward_raises():
    b1 = random_boxes(3, seed=11).requires_grad_(True)
    b2 = random_boxes(4, seed=12)
    out = op(b1, b2)
    go = torch.ones_like(out).requires_grad_(True)
    with pytest.raises(RuntimeError, match="double backward is not implemented"):
        torch.autograd.grad(out, b1, go, create_graph=True)


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
def test_cuda_nonfinite_and_large():
    a = torch.tensor(
        [[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, float("nan"), 2.0], [0.0, 0.0, float("inf"), 2.0], [0.0, 0.0, 2.0, 2.0]]
    )
    assert torch.equal(op(a.cuda(), a.cuda()).cpu(), op(a, a))
    b1 = random_boxes(2000, dtype=torch.float32, seed=17, image=800.0, side=100.0)
    b2 = random_boxes(3000, dtype=torch.float32, seed=18, image=800.0, side=100.0)
    torch.testing.assert_close(op(b1.cuda(), b2.cuda()).cpu(), op(b1, b2), rtol=1e-5, atol=1e-6)
