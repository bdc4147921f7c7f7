"""Tests of mmops::assign_score_withk: the conformance cases, then the float64
reference, mmcv's known vectors, gradcheck, duplicates, determinism, the CUDA
guard and the mmcv bridge."""

import importlib

import pytest
import torch
from assign_score_withk_reference import assign_score_withk_loops, assign_score_withk_ref
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, strict_index_check

import mmops

op = torch.ops.mmops.assign_score_withk


def random_inputs(B, npoint, K, M, N, O, generator, dtype=torch.float64, index_dtype=torch.int64):
    scores = torch.rand(B, npoint, K, M, dtype=torch.float64, generator=generator).to(dtype)
    points = torch.randn(B, N, M, O, dtype=torch.float64, generator=generator).to(dtype)
    centers = torch.randn(B, N, M, O, dtype=torch.float64, generator=generator).to(dtype)
    knn = torch.randint(0, max(N, 1), (B, npoint, K), generator=generator).to(index_dtype)
    return scores, points, centers, knn


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    B, npoint, K, M, N, O = (2, 5, 3, 4, 7, 6) if size == 0 else (3, 4, 5, 2, 9, 8)  # each dim changes
    g = torch.Generator().manual_seed(50 + size)
    args = random_inputs(B, npoint, K, M, N, O, g, dtype)
    return Sample(tuple(a.to(device) for a in args) + ("sum",))


def _empty(device, dtype):
    def sample(B, npoint, K, M, N, O):
        args = random_inputs(B, npoint, K, M, N, O, torch.Generator().manual_seed(0), dtype)
        return Sample(tuple(a.to(device) for a in args) + ("sum",), out_shapes=[(B, O, npoint, K)])

    return [
        sample(0, 3, 2, 2, 4, 3),  # no batch
        sample(2, 0, 2, 2, 4, 3),  # no centers
        sample(2, 3, 0, 2, 4, 3),  # no neighbours
        sample(2, 3, 2, 0, 4, 3),  # empty weight bank: the output is 0
        sample(2, 3, 2, 2, 4, 0),  # no channels
        sample(2, 0, 2, 2, 0, 3),  # no points and no centers
    ]


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.assign = mmops.AssignScoreWithK("avg")

    def forward(self, scores: torch.Tensor, points: torch.Tensor, centers: torch.Tensor, knn: torch.Tensor):
        a = self.assign(scores * 2.0, points, centers, knn).sin()
        return a + mmops.assign_score_withk(scores, points, centers, knn), torch.ops.mmops.assign_score_withk(
            scores, points * 0.5, centers, knn, "max"
        )


def _helpers(sample):
    scores, points, centers, knn, agg = sample.args
    out = op(scores, points, centers, knn, agg)
    return [(torch.ops.mmops._assign_score_withk_backward, (torch.randn_like(out), scores, points, centers, knn))]


def _message(text):
    return f"mmops::assign_score_withk: .*{text}"


def _with_index(knn, value):
    knn = knn.clone()
    knn.view(-1)[4] = value
    return knn


CONFORMANCE = [
    ConformanceCase(
        "assign_score_withk",
        op,
        _sample,
        grad_args=(0, 1, 2),
        nonzero_grads=True,
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        bad_inputs={
            "scores_3d": BadInput(lambda s, p, c, k, a: (s[0], p, c, k, a), _message("scores to be a 4-D"), meta=True),
            "int_scores": BadInput(lambda s, p, c, k, a: (s.int(), p, c, k, a), _message("floating point"), meta=True),
            "points_3d": BadInput(lambda s, p, c, k, a: (s, p[0], c, k, a), _message("point_features"), meta=True),
            "points_dtype": BadInput(lambda s, p, c, k, a: (s, p.double(), c, k, a), _message("dtype"), meta=True),
            "points_weights": BadInput(
                lambda s, p, c, k, a: (s, p[:, :, 1:], c, k, a), _message("point_features of shape"), meta=True
            ),
            "points_batch": BadInput(
                lambda s, p, c, k, a: (s, p[1:], c, k, a), _message("point_features of shape"), meta=True
            ),
            "centers_shape": BadInput(
                lambda s, p, c, k, a: (s, p, c[:, 1:], k, a), _message("center_features of the shape"), meta=True
            ),
            "centers_dtype": BadInput(
                lambda s, p, c, k, a: (s, p, c.double(), k, a), _message("center_features to have the dtype"), meta=True
            ),
            "float_knn": BadInput(
                lambda s, p, c, k, a: (s, p, c, k.float(), a), _message("knn_idx to have dtype"), meta=True
            ),
            "knn_2d": BadInput(lambda s, p, c, k, a: (s, p, c, k[0], a), _message("knn_idx to be a 3-D"), meta=True),
            "knn_shape": BadInput(
                lambda s, p, c, k, a: (s, p, c, k[:, :, 1:], a), _message("knn_idx of shape"), meta=True
            ),
            "aggregate": BadInput(
                lambda s, p, c, k, a: (s, p, c, k, "mean"),
                _message('aggregate must be "sum", "avg" or "max"'),
                meta=True,
            ),
            **{
                f"index_{v}": BadInput(
                    lambda s, p, c, k, a, v=v: (s, p, c, _with_index(k, v), a),
                    _message(r"every value of knn_idx in \[0, 7\)"),
                )
                for v in (-1, 7, 2**40)
            },
        },
    ),
]


class TestAssignScoreWithKConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def fwd_bwd(fn, scores, points, centers, knn, go, *extra):
    leaves = [t.detach().requires_grad_(True) for t in (scores, points, centers)]
    out = fn(*leaves, knn, *extra)
    grads = torch.autograd.grad(out, leaves, go)
    return out.detach(), grads


SHAPES = [(1, 1, 1, 1, 1, 1), (2, 6, 4, 3, 10, 5), (3, 4, 8, 2, 5, 33), (1, 40, 3, 1, 17, 2)]  # B, npoint, K, M, N, O


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("aggregate", ["sum", "avg", "max"])
def test_matches_reference(dtype, index_dtype, aggregate):
    g = torch.Generator().manual_seed(1)
    for B, npoint, K, M, N, O in SHAPES:
        s, p, c, k = random_inputs(B, npoint, K, M, N, O, g, dtype, index_dtype)
        go = torch.randn(B, O, npoint, K, generator=g, dtype=torch.float64).to(dtype)
        out, grads = fwd_bwd(op, s, p, c, k, go, aggregate)
        exp, gexp = fwd_bwd(assign_score_withk_ref, s.double(), p.double(), c.double(), k, go.double())
        assert out.dtype == dtype and out.shape == (B, O, npoint, K)
        torch.testing.assert_close(out.double(), exp, **TOL[dtype])
        for got, want in zip(grads, gexp):
            torch.testing.assert_close(got.double(), want, **TOL[dtype])


def test_reference_matches_loops():
    s, p, c, k = random_inputs(2, 3, 4, 2, 5, 3, torch.Generator().manual_seed(2))
    torch.testing.assert_close(assign_score_withk_ref(s, p, c, k), assign_score_withk_loops(s, p, c, k))
    torch.testing.assert_close(op(s, p, c, k), assign_score_withk_loops(s, p, c, k), **TOL[torch.float64])


def test_gradcheck():
    s, p, c, k = random_inputs(2, 3, 4, 2, 5, 3, torch.Generator().manual_seed(3))
    args = [t.requires_grad_(True) for t in (s, p, c)]
    assert torch.autograd.gradcheck(lambda a, b, d: op(a, b, d, k), args)
    assert torch.autograd.gradcheck(lambda a, b, d: op(a, b, d, k.int(), "max"), args)


def test_duplicate_neighbours_and_shared_centers():
    """Every pair picks point 1 and every center is point 1: the point and center gradients
    sum all contributions; the center feature cancels for the center pair itself."""
    s, p, c, _ = random_inputs(1, 3, 4, 2, 3, 2, torch.Generator().manual_seed(4))
    k = torch.ones(1, 3, 4, dtype=torch.long)
    go = torch.randn(1, 2, 3, 4, dtype=torch.float64)
    out, grads = fwd_bwd(op, s, p, c, k, go)
    exp, gexp = fwd_bwd(assign_score_withk_ref, s, p, c, k, go)
    torch.testing.assert_close(out, exp)
    for got, want in zip(grads, gexp):
        torch.testing.assert_close(got, want)
    # rows 0 and 2 were never chosen
    assert torch.equal(grads[1][:, [0, 2]], torch.zeros(1, 2, 2, 2, dtype=torch.float64))
    assert torch.equal(grads[2][:, [0, 2]], torch.zeros(1, 2, 2, 2, dtype=torch.float64))
    # point grad of row 1 = sum over all pairs of scores[m] * go[o]
    want = torch.einsum("bnkm,bonk->bmo", s, go)
    torch.testing.assert_close(grads[1][:, 1], want)
    torch.testing.assert_close(grads[2][:, 1], -want)


def test_nonfinite_values_propagate():
    """NaN / Inf features reach exactly the outputs (and score gradients) of the pairs that read them."""
    s, p, c, _ = random_inputs(1, 2, 2, 1, 3, 1, torch.Generator().manual_seed(5))
    k = torch.tensor([[[0, 1], [2, 2]]])
    p[0, 1, 0, 0] = float("nan")
    c[0, 2, 0, 0] = float("inf")
    out = op(s, p, c, k)[0, 0]  # [npoint, K]
    assert torch.isfinite(out[0, 0]) and torch.isnan(out[0, 1])
    assert torch.isinf(out[1]).all()


def test_strided_inputs():
    s, p, c, k = random_inputs(2, 6, 4, 3, 10, 5, torch.Generator().manual_seed(6))
    sv, pv, cv = (
        s.transpose(1, 2).contiguous().transpose(1, 2),
        p[..., ::1],
        c.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3),
    )
    kv = k.repeat_interleave(2, dim=2)[:, :, ::2]
    torch.testing.assert_close(op(sv, pv, cv, kv), op(s, p, c, k), rtol=0, atol=0)


def test_deterministic_backward():
    s, p, c, k = random_inputs(2, 64, 16, 4, 32, 8, torch.Generator().manual_seed(7), torch.float32)
    go = torch.randn(2, 8, 64, 16)
    runs = [fwd_bwd(op, s, p, c, k, go)[1] for _ in range(3)]
    assert all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r))


def test_autocast_runs_in_float32():
    s, p, c, k = random_inputs(2, 3, 4, 2, 5, 3, torch.Generator().manual_seed(8), torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(s.bfloat16(), p, c.bfloat16(), k)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, op(s.bfloat16().float(), p, c.bfloat16().float(), k).bfloat16(), rtol=0, atol=0)


def test_double_backward_refused():
    s, p, c, k = random_inputs(1, 2, 2, 1, 3, 1, torch.Generator().manual_seed(9))
    s.requires_grad_(True)
    go = torch.randn(1, 1, 2, 2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(s, p, c, k), s, go, create_graph=True)


def test_backward_rejects_bad_indices():
    s, p, c, k = random_inputs(1, 2, 2, 1, 3, 1, torch.Generator().manual_seed(10))
    go = torch.randn(1, 1, 2, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"every value of knn_idx in \[0, 3\).*got values in \[0, 3\]"):
        torch.ops.mmops._assign_score_withk_backward(
            go, s, p, c, k.flatten().index_fill(0, torch.tensor([3]), 3).view_as(k)
        )
    with pytest.raises(RuntimeError, match="grad_output of shape"):
        torch.ops.mmops._assign_score_withk_backward(go[..., :1], s, p, c, k)


# --------------------------------------------------------------------------- mmcv's vectors

# tests/test_ops/test_assign_score_withk.py of mmcv: B=2, npoint=2, K=4, M=2, N=8, O=4
MMCV_SCORES = [
    [[[0.06947571, 0.6065746], [0.28462553, 0.8378516], [0.7595994, 0.97220325], [0.519155, 0.766185]],
     [[0.15348864, 0.6051019], [0.21510637, 0.31916398], [0.00236845, 0.5842595], [0.6783676, 0.5216348]]],
    [[[0.23089725, 0.5568468], [0.7405102, 0.06438422], [0.6887394, 0.22089851], [0.0502342, 0.79228795]],
     [[0.44883424, 0.15427643], [0.13817799, 0.34856772], [0.7989621, 0.33788306], [0.15699774, 0.7693662]]],
]  # fmt: skip
MMCV_POINTS = [
    [[[0.06001121, 0.92963666, 0.5753327, 0.7251477], [0.53563064, 0.23129565, 0.92366195, 0.44261628]],
     [[0.5770022, 0.56625944, 0.23560429, 0.11178821], [0.7735967, 0.95678777, 0.25468266, 0.02895975]],
     [[0.0589869, 0.09017515, 0.5977862, 0.02797985], [0.603862, 0.35991007, 0.85761684, 0.3096559]],
     [[0.22359002, 0.13983732, 0.5544243, 0.68863827], [0.85646236, 0.75651926, 0.8638947, 0.83600986]],
     [[0.45424145, 0.27458847, 0.6456112, 0.47162914], [0.15773582, 0.47645122, 0.79964715, 0.3323908]],
     [[0.8351399, 0.84696376, 0.9431732, 0.29418713], [0.77168906, 0.6996871, 0.19354361, 0.03392768]],
     [[0.30976456, 0.7074133, 0.581795, 0.976677], [0.69656056, 0.07199162, 0.4708506, 0.29117996]],
     [[0.5829035, 0.30201727, 0.76556486, 0.0935446], [0.88030535, 0.16129416, 0.9242525, 0.49545723]]],
    [[[0.50899494, 0.06482804, 0.44939405, 0.37704808], [0.47028124, 0.11969638, 0.62823206, 0.28560323]],
     [[0.40690207, 0.689753, 0.51636654, 0.23040164], [0.06935787, 0.00488842, 0.22462702, 0.09182382]],
     [[0.26611632, 0.00184339, 0.7730655, 0.5228131], [0.87776035, 0.77895886, 0.2787183, 0.16620636]],
     [[0.502574, 0.04039001, 0.5368497, 0.98379374], [0.40973026, 0.3238272, 0.9733018, 0.13988364]],
     [[0.04586202, 0.20983845, 0.20662665, 0.22270602], [0.60387236, 0.5155574, 0.51237285, 0.6528438]],
     [[0.45735973, 0.86821306, 0.61054605, 0.8370336], [0.45193362, 0.3734138, 0.7825672, 0.5699416]],
     [[0.44591594, 0.12447512, 0.09282011, 0.7055254], [0.25223452, 0.46696228, 0.7051136, 0.892151]],
     [[0.49615085, 0.47321403, 0.93138885, 0.7652197], [0.38766378, 0.30332977, 0.23131835, 0.02863514]]],
]  # fmt: skip
MMCV_CENTERS = [
    [[[0.83878064, 0.96658987, 0.8033424, 0.9598312], [0.45035273, 0.8768925, 0.977736, 0.54547966]],
     [[0.01041394, 0.597893, 0.36212963, 0.4410367], [0.94879234, 0.8372817, 0.21237361, 0.67945415]],
     [[0.5096087, 0.26401454, 0.60034937, 0.5417416], [0.87591463, 0.546456, 0.4096033, 0.16373193]],
     [[0.79547447, 0.1482386, 0.12840575, 0.45384115], [0.5640288, 0.944541, 0.5745328, 0.73229736]],
     [[0.93011934, 0.7406011, 0.62621707, 0.8677915], [0.91563636, 0.3595413, 0.6678378, 0.6085383]],
     [[0.22431666, 0.65617776, 0.7483924, 0.6263364], [0.30968404, 0.78204364, 0.14899081, 0.09628749]],
     [[0.73675203, 0.72104895, 0.4648038, 0.6101647], [0.7817645, 0.16572917, 0.3311919, 0.43407398]],
     [[0.8193154, 0.09559608, 0.05978829, 0.90262103], [0.4256065, 0.8165596, 0.8206446, 0.6604721]]],
    [[[0.7159653, 0.18600845, 0.21433902, 0.3159626], [0.3921569, 0.33221376, 0.5061177, 0.7961841]],
     [[0.95338356, 0.04785997, 0.67185795, 0.6538394], [0.4729132, 0.33404195, 0.17750603, 0.8445621]],
     [[0.6755793, 0.16193843, 0.75943846, 0.92123103], [0.2781859, 0.03114432, 0.710638, 0.52729136]],
     [[0.8376105, 0.10858494, 0.13208169, 0.365772], [0.5930795, 0.27390373, 0.14036089, 0.170403]],
     [[0.3479789, 0.89855295, 0.04844379, 0.9871029], [0.29781651, 0.0244137, 0.9179047, 0.8081611]],
     [[0.12460887, 0.44991326, 0.19382608, 0.35037738], [0.2773472, 0.4362057, 0.36757517, 0.5993509]],
     [[0.29630446, 0.90046406, 0.5417113, 0.13510644], [0.09623539, 0.04226565, 0.32001644, 0.44358212]],
     [[0.5274848, 0.82096446, 0.9415489, 0.7123748], [0.7537517, 0.8086482, 0.85345286, 0.7472754]]],
]  # fmt: skip
MMCV_KNN = [[[6, 7, 4, 6], [2, 4, 2, 4]], [[7, 1, 3, 2], [6, 0, 2, 6]]]
MMCV_OUTPUT = [
    [[[-0.08134781, 0.03877336, -0.8212776, -0.2869547], [-0.23378491, -0.24112664, -0.1600166, -0.4121864]],
     [[-0.05780616, -0.12298299, -0.0370461, -0.07889931], [-0.13956165, -0.02006848, -0.10940295, -0.0293439]],
     [[0.09284145, 0.58250105, 0.5927749, 0.16774094], [0.27070042, 0.13422406, 0.2617501, 0.23416464]],
     [[-0.06121218, -0.09561322, -0.20408826, 0.08079343], [0.00944228, 0.03874819, 0.08404065, 0.04041629]]],
    [[[-0.2110898, -0.13335688, -0.09315082, 0.08512095], [0.09121774, 0.15976946, 0.23994486, 0.14350912]],
     [[-0.36167958, -0.14891288, -0.64470863, -0.0646704], [-0.28276974, -0.08847666, -0.46904767, 0.20491874]],
     [[-0.34877953, -0.35533834, -0.25225785, -0.4638189], [-0.1420663, 0.09467781, 0.17088932, 0.22580585]],
     [[-0.3879708, -0.3991068, 0.05276498, -0.46989647], [0.32522714, -0.02163534, 0.21604237, 0.4346682]]],
]  # fmt: skip
MMCV_SCORES_GRAD = [
    [[[0.04288036, -0.18217683], [-0.78873926, 0.7485497], [-0.6866992, 0.05346543], [0.04288036, -0.18217683]],
     [[-1.1407862, 0.13533896], [-0.06964391, -0.22948086], [-1.1407862, 0.13533896], [-0.06964391, -0.22948086]]],
    [[[-0.3363995, -2.212181], [-1.1589496, -2.7724311], [-0.9387654, -1.3163853], [-1.4385346, -1.0614843]],
     [[-0.5048497, 1.4143617], [-0.47332114, 0.6017133], [-0.30974793, 1.1995442], [-0.5048497, 1.4143617]]],
]  # fmt: skip
# point / center gradients: equal across the 4 channels; (row, m) -> value, every other row 0
MMCV_POINTS_GRAD = {
    0: {2: (0.15585709, 1.1893613), 4: (1.6530733, 1.8130021), 6: (0.58863074, 1.3727596), 7: (0.28462553, 0.8378516)},
    1: {0: (0.13817799, 0.34856772), 1: (0.7405102, 0.06438422), 2: (0.8491963, 1.1301711),
        3: (0.6887394, 0.22089851), 6: (0.605832, 0.92364264), 7: (0.23089725, 0.5568468)},
}  # fmt: skip
MMCV_CENTERS_GRAD = {
    0: {2: (-1.0493311, -2.0301602), 6: (-1.6328557, -3.1828144)},
    1: {6: (-1.5429721, -1.6100934), 7: (-1.7103812, -1.6344175)},
}


def _expand(table):
    out = torch.zeros(2, 8, 2, 4)
    for b, rows in table.items():
        for row, values in rows.items():
            out[b, row] = torch.tensor(values)[:, None]
    return out


def _check_mmcv_vectors(fn, device):
    s, p, c = (torch.tensor(v, device=device).requires_grad_(True) for v in (MMCV_SCORES, MMCV_POINTS, MMCV_CENTERS))
    k = torch.tensor(MMCV_KNN, device=device)
    out = fn(s, p, c, k, "sum")
    out.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), torch.tensor(MMCV_OUTPUT), rtol=0, atol=1e-6)
    torch.testing.assert_close(s.grad.cpu(), torch.tensor(MMCV_SCORES_GRAD), rtol=0, atol=1e-6)
    torch.testing.assert_close(p.grad.cpu(), _expand(MMCV_POINTS_GRAD), rtol=0, atol=1e-6)
    torch.testing.assert_close(c.grad.cpu(), _expand(MMCV_CENTERS_GRAD), rtol=0, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_mmcv_known_vectors(device):
    _check_mmcv_vectors(mmops.assign_score_withk, device)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_cuda_matches_cpu(dtype, index_dtype):
    """Tiles with ragged edges (npoint * K and O not multiples of 32) and a PAConv-like shape."""
    g = torch.Generator().manual_seed(11)
    for shape in ((2, 37, 5, 3, 20, 45), (2, 128, 16, 8, 256, 64), (1, 3, 1, 1, 2, 1)):
        s, p, c, k = random_inputs(*shape, g, dtype, index_dtype)
        B, npoint, K, M, N, O = shape
        go = torch.randn(B, O, npoint, K, generator=g).to(dtype)
        out, grads = fwd_bwd(op, s, p, c, k, go)
        out_c, grads_c = fwd_bwd(op, s.cuda(), p.cuda(), c.cuda(), k.cuda(), go.cuda())
        torch.testing.assert_close(out_c.cpu(), out, **TOL[dtype])
        for a, b in zip(grads_c, grads):
            torch.testing.assert_close(a.cpu(), b, **TOL[dtype])


@pytest.mark.cuda
def test_cuda_deterministic_bitwise():
    s, p, c, k = random_inputs(4, 256, 16, 8, 128, 64, torch.Generator().manual_seed(12), torch.float32)
    go = torch.randn(4, 64, 256, 16)
    runs = [fwd_bwd(op, *(t.cuda() for t in (s, p, c, k, go)))[1] for _ in range(3)]
    assert all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r))


@pytest.mark.cuda
def test_cuda_out_of_range_indices_are_guarded():
    """Unchecked CUDA: a pair whose neighbour or center index lies outside [0, N) gives 0 and no
    gradient (the reference's guard); the strict switch raises instead."""
    s, p, c, k = random_inputs(2, 6, 4, 3, 10, 5, torch.Generator().manual_seed(13))
    k[0, 1, 2] = -1  # one neighbour
    k[1, 3, 0] = 10  # a center: its whole neighbourhood
    k[1, 4, 1] = 2**40
    go = torch.randn(2, 5, 6, 4, dtype=torch.float64)
    out, grads = fwd_bwd(op, *(t.cuda() for t in (s, p, c, k)), go.cuda())
    exp, gexp = fwd_bwd(assign_score_withk_ref, s, p, c, k, go)
    torch.testing.assert_close(out.cpu(), exp)
    assert torch.equal(out[1, :, 3].cpu(), torch.zeros(5, 4, dtype=torch.float64))
    for a, b in zip(grads, gexp):
        torch.testing.assert_close(a.cpu(), b)
    with strict_index_check(True), pytest.raises(RuntimeError, match="every value of knn_idx"):
        op(*(t.cuda() for t in (s, p, c, k)))


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.assign_score_withk")
    _check_mmcv_vectors(ops.assign_score_withk, "cpu")
    _check_mmcv_vectors(module.AssignScoreWithK.apply, "cpu")
    s, p, c = (torch.tensor(v) for v in (MMCV_SCORES, MMCV_POINTS, MMCV_CENTERS))
    k = torch.tensor(MMCV_KNN)
    out = torch.zeros(2, 4, 2, 4)
    module.ext_module.assign_score_withk_forward(2, 8, 2, 2, 4, 4, 0, p, c, s, k, out)
    torch.testing.assert_close(out, torch.tensor(MMCV_OUTPUT), rtol=0, atol=1e-6)
    gp, gc, gs = torch.zeros_like(p), torch.zeros_like(c), torch.zeros_like(s)
    module.ext_module.assign_score_withk_backward(2, 8, 2, 2, 4, 4, 0, torch.ones_like(out), p, c, s, k, gp, gc, gs)
    torch.testing.assert_close(gs, torch.tensor(MMCV_SCORES_GRAD), rtol=0, atol=1e-6)
    torch.testing.assert_close(gp, _expand(MMCV_POINTS_GRAD), rtol=0, atol=1e-6)
    torch.testing.assert_close(gc, _expand(MMCV_CENTERS_GRAD), rtol=0, atol=1e-6)
