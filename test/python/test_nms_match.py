"""mmops nms_match: the conformance cases, a plain-Python float64 reference of mmcv's
algorithm, mmcv's published vector, the wrapper (tensor and numpy in and out), ties,
NaN, empty and bad inputs, and CUDA == CPU (skipped without a GPU)."""

import math

import numpy as np
import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample

import mmops

match_op = torch.ops.mmops.nms_match

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


# ----------------------------------------------------------------------------- reference


def iou_ref(a, b):
    """IoU of two (x1, y1, x2, y2) lists in Python floats, with mmops' defined results:
    a box with a non-finite coordinate overlaps nothing, a union <= 0 gives 0."""
    if not all(math.isfinite(v) for v in a + b):
        return 0.0
    w = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    h = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def nms_match_ref(dets, thr):
    """mmcv's nms_match: visit the boxes by decreasing score (NaN last, ties to the lower
    index); a box not yet in a group leads one and takes every later box not yet in a
    group with IoU >= thr. Returns the groups as lists of indices."""
    d = dets.detach().double().cpu().tolist()
    scores = [row[4] for row in d]
    order = sorted(
        range(len(d)), key=lambda i: (math.isnan(scores[i]), 0.0 if math.isnan(scores[i]) else -scores[i], i)
    )
    grouped = [False] * len(d)
    groups = []
    for pos, i in enumerate(order):
        if grouped[i]:
            continue
        grouped[i] = True
        group = [i]
        for j in order[pos + 1 :]:
            if not grouped[j] and iou_ref(d[i][:4], d[j][:4]) >= thr:
                grouped[j] = True
                group.append(j)
        groups.append(group)
    return groups


def rows_of(groups):
    """The op's [N, 2] rows (leader, member) for a list of groups."""
    return torch.tensor([[g[0], m] for g in groups for m in g], dtype=torch.long).reshape(-1, 2)


def random_dets(n, *, image=100.0, max_side=30.0, dtype=torch.float32, device="cpu", seed=0, clusters=0):
    """n boxes (uniform, or jittered copies of `clusters` boxes) with random scores."""
    g = torch.Generator().manual_seed(seed)
    if clusters:
        centre = torch.rand(clusters, 2, generator=g, dtype=torch.float64) * image
        pick = torch.randint(0, clusters, (n,), generator=g)
        xy = centre[pick] + torch.randn(n, 2, generator=g, dtype=torch.float64) * 2.0
        wh = 10.0 + torch.rand(n, 2, generator=g, dtype=torch.float64) * 4.0
    else:
        xy = torch.rand(n, 2, generator=g, dtype=torch.float64) * image
        wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * max_side
    scores = torch.rand(n, 1, generator=g, dtype=torch.float64)
    return torch.cat([xy, xy + wh, scores], 1).to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------- conformance


def _sample(thr, n=40, other_n=90, seed=41):
    def sample(device, dtype, size):
        return Sample((random_dets(n if size == 0 else other_n, seed=seed + size, dtype=dtype, device=device), thr))

    return sample


def _empty(device, dtype):
    return [Sample((torch.zeros(0, 5, dtype=dtype, device=device), 0.5), out_shapes=[(0, 2)])]


def _cuda_samples(dtype):
    """Tiles of 64 boxes (63, 64, 65), clusters, and mask chunks (5000)."""
    for n in (0, 1, 63, 64, 65, 1000, 5000):
        for thr in (-0.1, 0.0, 0.5, 0.8):
            yield Sample((random_dets(n, image=400.0, max_side=60.0, dtype=dtype, seed=n), thr))
        yield Sample((random_dets(n, image=400.0, dtype=dtype, seed=n, clusters=max(1, n // 20)), 0.4))


class _Groups(torch.nn.Module):
    """The op's rows used further on: each box's leader score minus its own."""

    def forward(self, dets: torch.Tensor):
        rows = torch.ops.mmops.nms_match(dets * 1.0, 0.5)
        return dets[rows[:, 0], 4] - dets[rows[:, 1], 4], rows


_Z = torch.zeros
CONFORMANCE = [
    ConformanceCase(
        "nms_match",
        match_op,
        _sample(0.5),
        dtypes=DTYPES,
        empty=_empty,
        module=_Groups,
        cuda_samples=_cuda_samples,
        bad_inputs={
            "dets_4_cols": BadInput(
                lambda *_: (_Z(3, 4), 0.5),
                r"dets to be a 2-D tensor of shape \[N, 5\] .*but got shape \[3, 4\]",
                meta=True,
            ),
            "dets_1d": BadInput(lambda *_: (_Z(5), 0.5), r"dets to be a 2-D tensor of shape \[N, 5\]", meta=True),
            "dets_long": BadInput(
                lambda *_: (_Z(3, 5, dtype=torch.long), 0.5),
                "dets to have a floating point dtype, but got Long",
                meta=True,
            ),
            "threshold_nan": BadInput(
                lambda *_: (_Z(3, 5), float("nan")), "iou_threshold must be a number, but got nan"
            ),
        },
    ),
    ConformanceCase("nms_match_thr0", match_op, _sample(0.0), dtypes=DTYPES, empty=_empty),
]


class TestNmsMatchConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- known vectors

# mmcv tests/test_ops/test_nms.py::test_nms_match (float32, iou_thr 0.6)
MMCV_DETS = [
    [49.1, 32.4, 51.0, 35.9, 0.9],
    [49.3, 32.9, 51.0, 35.3, 0.9],
    [35.3, 11.5, 39.9, 14.5, 0.4],
    [35.2, 11.7, 39.7, 15.7, 0.3],
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_mmcv_vector(dtype):
    # IoU(0, 1) = 4.08 / 6.65 = 0.61, IoU(2, 3) = 12.32 / 19.48 = 0.63: two groups;
    # boxes 0 and 1 tie at 0.9: the lower index leads. (bfloat16 rounds the
    # corners so far that IoU(0, 1) drops to 0.56.)
    dets = torch.tensor(MMCV_DETS, dtype=dtype)
    rows = match_op(dets, 0.6)
    assert rows.dtype == torch.long
    assert rows.tolist() == [[0, 0], [0, 1], [2, 2], [2, 3]]
    groups = mmops.nms_match(dets, 0.6)
    assert [g.tolist() for g in groups] == [[0, 1], [2, 3]]
    assert all(isinstance(g, torch.Tensor) and g.dtype == torch.long for g in groups)
    # the leaders are what nms with the same threshold keeps (no IoU sits at 0.6 here)
    keep = mmops.nms(dets[:, :4].contiguous(), dets[:, 4].contiguous(), 0.6)[1]
    assert {g[0].item() for g in groups} == set(keep.tolist())


def test_mmcv_vector_numpy():
    np_dets = np.array(MMCV_DETS, dtype=np.float32)
    groups = mmops.nms_match(np_dets, 0.6)
    assert len(groups) == 2 and all(isinstance(g, np.ndarray) for g in groups)
    assert all(g.dtype == np.array([0], dtype=int).dtype for g in groups)
    assert [g.tolist() for g in groups] == [[0, 1], [2, 3]]
    tensor_groups = mmops.nms_match(torch.from_numpy(np_dets), 0.6)
    for t, g in zip(tensor_groups, groups):
        assert np.array_equal(t.numpy(), g)
    # float64 arrays work too (mmcv's kernel reads float32 only)
    assert [g.tolist() for g in mmops.nms_match(np_dets.astype(np.float64), 0.6)] == [[0, 1], [2, 3]]
    # above both IoUs: every box alone
    assert [g.tolist() for g in mmops.nms_match(np_dets, 0.7)] == [[0], [1], [2], [3]]


# ----------------------------------------------------------------------------- random vs reference


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 7, 64, 65, 300])
def test_random_against_reference(dtype, n):
    dets = random_dets(n, dtype=dtype, seed=n)
    for thr in (-0.1, 0.0, 0.3, 0.5, 0.9, 1.0):
        expected = nms_match_ref(dets, thr)
        assert torch.equal(match_op(dets, thr), rows_of(expected)), thr
        assert [g.tolist() for g in mmops.nms_match(dets, thr)] == expected, thr


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_clustered_against_reference(dtype):
    dets = random_dets(400, image=200.0, dtype=dtype, seed=3, clusters=15)
    for thr in (0.3, 0.5, 0.7):
        expected = nms_match_ref(dets, thr)
        assert max(len(g) for g in expected) > 5  # real groups
        assert torch.equal(match_op(dets, thr), rows_of(expected))


def test_long_scan_runs_in_parallel_chunks():
    # > 8192 boxes after the first leader: the CPU scan is split across threads
    dets = random_dets(9000, image=3000.0, max_side=40.0, seed=8)
    rows = match_op(dets, 0.3)
    assert sorted(rows[:, 1].tolist()) == list(range(9000))
    sub = rows[:, 0] == rows[:, 1]
    keep = mmops.nms(dets[:, :4], dets[:, 4], 0.3)[1]
    # nms suppresses on IoU > thr, nms_match groups on >=; random data has no IoU at 0.3
    assert torch.equal(rows[sub, 0], keep)


def test_rows_structure():
    dets = random_dets(200, seed=4, clusters=20)
    rows = match_op(dets, 0.4)
    assert rows.shape == (200, 2)
    assert sorted(rows[:, 1].tolist()) == list(range(200))  # every box once
    scores = dets[:, 4]
    groups = mmops.nms_match(dets, 0.4)
    leaders = torch.stack([g[0] for g in groups])
    assert torch.all(scores[leaders][1:] <= scores[leaders][:-1])  # groups by leader score
    for g in groups:
        assert torch.all(scores[g][1:] <= scores[g][:-1])  # members by score, leader first


# ----------------------------------------------------------------------------- ties, threshold, NaN


def test_threshold_is_inclusive():
    # IoU exactly 0.5 joins the group at threshold 0.5 (mmcv: ovr >= iou_threshold)
    dets = torch.tensor([[0.0, 0.0, 2.0, 1.0, 0.9], [0.0, 0.0, 1.0, 1.0, 0.8]])
    assert match_op(dets, 0.5).tolist() == [[0, 0], [0, 1]]
    assert match_op(dets, 0.5001).tolist() == [[0, 0], [1, 1]]
    # threshold <= 0: IoU 0 qualifies, so disjoint boxes join the first group too
    far = torch.tensor([[0.0, 0.0, 1.0, 1.0, 0.2], [5.0, 5.0, 6.0, 6.0, 0.7]])
    assert match_op(far, 0.0).tolist() == [[1, 1], [1, 0]]
    assert match_op(far, 1e-9).tolist() == [[1, 1], [0, 0]]


def test_threshold_compared_in_compute_type():
    # IoU 1/3; float32 inputs compare the float32 IoU with the threshold rounded to
    # float32, as mmcv does; float64 inputs compare in float64.
    dets = torch.tensor([[0.0, 0.0, 3.0, 1.0, 0.9], [0.0, 0.0, 1.0, 1.0, 0.8]])
    v = (torch.tensor(1.0) / torch.tensor(3.0)).item()  # the float32 IoU
    above = v + 1e-9
    assert torch.tensor(above, dtype=torch.float32).item() == v
    assert match_op(dets, above).tolist() == [[0, 0], [0, 1]]
    assert match_op(dets.double(), above).tolist() == [[0, 0], [1, 1]]
    assert match_op(dets.double(), 1 / 3).tolist() == [[0, 0], [0, 1]]
    assert match_op(dets, v * (1 + 2e-7)).tolist() == [[0, 0], [1, 1]]


def test_ties_lower_index_first():
    same = [0.0, 0.0, 10.0, 10.0]
    dets = torch.tensor([same + [0.5]] * 3 + [[50.0, 50.0, 60.0, 60.0, 0.5]] * 2)
    assert [g.tolist() for g in mmops.nms_match(dets, 0.5)] == [[0, 1, 2], [3, 4]]
    dets[:, 4] = torch.tensor([0.5, 0.7, 0.7, 0.7, 0.5])
    assert [g.tolist() for g in mmops.nms_match(dets, 0.5)] == [[1, 2, 0], [3, 4]]
    # -0.0 ties with +0.0
    dets[:2, 4] = torch.tensor([-0.0, 0.0])
    assert [g.tolist() for g in mmops.nms_match(dets[:2], 0.5)] == [[0, 1]]


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_and_inf(dtype):
    nan, inf = float("nan"), float("inf")
    dets = torch.tensor(
        [
            [0.0, 0.0, 10.0, 10.0, 0.5],
            [0.0, 0.0, 10.0, 10.0, nan],
            [1.0, 1.0, 10.0, 10.0, 0.4],
            [0.0, 0.0, nan, 10.0, 0.9],
            [0.0, 0.0, inf, 10.0, 0.8],
        ],
        dtype=dtype,
    )
    # NaN scores rank last; a non-finite box has IoU 0 with every box: alone above 0
    assert [g.tolist() for g in mmops.nms_match(dets, 0.5)] == [[3], [4], [0, 2, 1]]
    assert torch.equal(match_op(dets, 0.5), rows_of(nms_match_ref(dets, 0.5)))
    # ... and grouped at a threshold <= 0 (IoU 0 >= 0)
    assert [g.tolist() for g in mmops.nms_match(dets, 0.0)] == [[3, 4, 0, 2, 1]]


# ----------------------------------------------------------------------------- empty, inputs, errors


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty(dtype):
    rows = match_op(torch.zeros(0, 5, dtype=dtype), 0.5)
    assert rows.shape == (0, 2) and rows.dtype == torch.long
    assert mmops.nms_match(torch.zeros(0, 5, dtype=dtype), 0.5) == []
    # mmcv returns [] for any array without rows, before checking the shape
    assert mmops.nms_match(np.array([]), 0.6) == []
    assert mmops.nms_match(torch.zeros(0, 3), 0.6) == []


def test_strided_input_and_gradients():
    dets = random_dets(150, seed=9)
    wide = torch.zeros(150, 10)
    wide[:, ::2] = dets
    assert not wide[:, ::2].is_contiguous()
    assert torch.equal(match_op(wide[:, ::2], 0.4), match_op(dets, 0.4))
    grad_dets = dets.clone().requires_grad_(True)
    rows = match_op(grad_dets, 0.4)
    assert not rows.requires_grad and torch.equal(rows, match_op(dets, 0.4))
    assert torch.equal(torch.cat(mmops.nms_match(grad_dets, 0.4)), rows[:, 1])


def test_bad_inputs():
    with pytest.raises(RuntimeError, match=r"mmops::nms_match: expected dets to be a 2-D tensor of shape \[N, 5\]"):
        mmops.nms_match(np.zeros((2, 3)), 0.6)  # mmcv: AssertionError
    with pytest.raises(RuntimeError, match="expected dets to have a floating point dtype, but got Int"):
        match_op(torch.zeros(2, 5, dtype=torch.int32), 0.6)
    with pytest.raises(RuntimeError, match="iou_threshold must be a number, but got nan"):
        mmops.nms_match(torch.zeros(2, 5), float("nan"))


def test_autocast_half():
    dets = random_dets(120, seed=13, clusters=10)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rows = match_op(dets.to(torch.bfloat16), 0.5)
    assert torch.equal(rows, match_op(dets.to(torch.bfloat16).float(), 0.5))


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("n", [3000, 20000])
def test_cuda_matches_cpu_and_reference(n):
    """3000: one mask chunk; 20000 clustered: large groups, many tiles per group."""
    for dets in (random_dets(n, image=800.0, seed=n), random_dets(n, image=800.0, seed=n, clusters=n // 50)):
        for thr in (0.0, 0.3, 0.6):
            cpu = match_op(dets, thr)
            assert torch.equal(match_op(dets.cuda(), thr).cpu(), cpu), thr
            groups = mmops.nms_match(dets.cuda(), thr)
            assert all(g.device.type == "cuda" for g in groups)
            assert torch.equal(torch.cat(groups).cpu(), cpu[:, 1])
    small = random_dets(300, seed=1, clusters=12)
    assert torch.equal(match_op(small.cuda(), 0.5).cpu(), rows_of(nms_match_ref(small, 0.5)))


@pytest.mark.cuda
def test_cuda_ties_nan_and_chunks():
    # many ties across tiles; 70k boxes: the mask is built in several 256 MiB chunks
    dets = random_dets(70000, image=4000.0, max_side=50.0, seed=5)
    dets[:, 4] = (torch.arange(70000) % 7).float()
    dets[::97, 2] = float("nan")
    assert torch.equal(match_op(dets.cuda(), 0.3).cpu(), match_op(dets, 0.3))
