"""Tests of mmops::gather_points, group_points and stack_group_points: the conformance cases,
float64 loop references (forward and backward), mmcv's vectors, gradcheck, repeated indices,
index errors, the mmcv-named wrappers and the CUDA-specific tests (skipped without a GPU)."""

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import strict_index_check

import mmops

gather = torch.ops.mmops.gather_points
group = torch.ops.mmops.group_points
stack = torch.ops.mmops.stack_group_points
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def random_indices(shape, n, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, shape, generator=g, dtype=torch.int32).to(device)


def random_features(shape, dtype=torch.float64, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------- references


def gather_ref(features, idx, grad_out=None):
    """float64 out [B, C, *idx.shape[1:]] and the features' gradient for grad_out, by loops."""
    B, C, N = features.shape
    flat = idx.reshape(B, -1)
    out = torch.zeros(B, C, flat.shape[1], dtype=torch.float64)
    grad = torch.zeros(B, C, N, dtype=torch.float64)
    go = None if grad_out is None else grad_out.double().reshape(B, C, -1)
    for b in range(B):
        for k, i in enumerate(flat[b].tolist()):
            out[b, :, k] = features[b, :, i].double()
            if go is not None:
                grad[b, :, i] += go[b, :, k]
    return out.reshape(B, C, *idx.shape[1:]), grad


def stack_ref(features, fcnt, idx, icnt, grad_out=None):
    """float64 out [M, C, S] of the stacked grouping and the features' gradient, by loops."""
    out = torch.zeros(idx.shape[0], features.shape[1], idx.shape[1], dtype=torch.float64)
    grad = torch.zeros(features.shape, dtype=torch.float64)
    row, start = 0, 0
    for b in range(len(fcnt)):
        for _ in range(int(icnt[b])):
            for s, i in enumerate(idx[row].tolist()):
                out[row, :, s] = features[start + i].double()
                if grad_out is not None:
                    grad[start + i] += grad_out[row, :, s].double()
            row += 1
        start += int(fcnt[b])
    return out, grad


def stacked_inputs(fcnt, icnt, channels, nsample, dtype=torch.float64, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(sum(fcnt), channels, generator=g, dtype=torch.float64).to(dtype)
    idx = torch.cat([torch.randint(0, f, (m, nsample), generator=g) for f, m in zip(fcnt, icnt)]).int()
    f32 = dict(dtype=torch.int32, device=device)
    return feats.to(device), torch.tensor(fcnt, **f32), idx.to(device), torch.tensor(icnt, **f32)


# ----------------------------------------------------------------------------- conformance


def _gather_sample(device, dtype, size):
    (b, c, n, m) = (2, 3, 10, 7) if size == 0 else (3, 4, 12, 5)
    f = random_features((b, c, n), dtype, seed=size, device=device)
    return Sample((f, random_indices((b, m), n, seed=size, device=device)))


def _group_sample(device, dtype, size):
    (b, c, n, p, s) = (2, 3, 10, 4, 5) if size == 0 else (3, 4, 12, 5, 2)  # distinct: no duck sizing
    f = random_features((b, c, n), dtype, seed=size, device=device)
    return Sample((f, random_indices((b, p, s), n, seed=size, device=device)))


def _stack_sample(device, dtype, size):
    fcnt, icnt = ([5, 7], [3, 4]) if size == 0 else ([4, 6, 3], [2, 5, 1])
    return Sample(stacked_inputs(fcnt, icnt, 3 + size, 3 + size, dtype, seed=size, device=device))


def _gather_empty(device, dtype):
    f, i = dict(dtype=dtype, device=device), dict(dtype=torch.int32, device=device)
    return [
        Sample((torch.randn(0, 3, 5, **f), torch.zeros(0, 4, **i)), out_shapes=[(0, 3, 4)]),
        Sample((torch.randn(2, 0, 5, **f), torch.zeros(2, 4, **i)), out_shapes=[(2, 0, 4)]),
        Sample((torch.randn(2, 3, 5, **f), torch.zeros(2, 0, **i)), out_shapes=[(2, 3, 0)]),
        Sample((torch.randn(2, 3, 0, **f), torch.zeros(2, 0, **i)), out_shapes=[(2, 3, 0)]),
    ]


def _group_empty(device, dtype):
    f, i = dict(dtype=dtype, device=device), dict(dtype=torch.int32, device=device)
    return [
        Sample((torch.randn(0, 3, 5, **f), torch.zeros(0, 2, 4, **i)), out_shapes=[(0, 3, 2, 4)]),
        Sample((torch.randn(2, 0, 5, **f), torch.zeros(2, 2, 4, **i)), out_shapes=[(2, 0, 2, 4)]),
        Sample((torch.randn(2, 3, 5, **f), torch.zeros(2, 0, 4, **i)), out_shapes=[(2, 3, 0, 4)]),
        Sample((torch.randn(2, 3, 5, **f), torch.zeros(2, 3, 0, **i)), out_shapes=[(2, 3, 3, 0)]),
    ]


def _stack_empty(device, dtype):
    f, i = dict(dtype=dtype, device=device), dict(dtype=torch.int32, device=device)
    cnt = lambda *v: torch.tensor(v, **i)  # noqa: E731
    return [
        Sample((torch.randn(5, 3, **f), cnt(5), torch.zeros(0, 4, **i), cnt(0)), out_shapes=[(0, 3, 4)]),
        Sample((torch.randn(5, 0, **f), cnt(5), torch.zeros(2, 4, **i), cnt(2)), out_shapes=[(2, 0, 4)]),
        Sample((torch.randn(0, 3, **f), cnt(0), torch.zeros(0, 4, **i), cnt(0)), out_shapes=[(0, 3, 4)]),
    ]


def _cuda_samples(make):
    def samples(dtype):
        for seed, size in enumerate((0, 1, 2)):
            yield make(seed, size, dtype)

    return samples


def _gather_cuda(seed, size, dtype):
    b, c, n, m = [(2, 3, 10, 7), (3, 70, 1000, 600), (2, 9, 50, 3000)][size]  # many repeats in the last
    return Sample((random_features((b, c, n), dtype, seed), random_indices((b, m), n, seed)))


def _group_cuda(seed, size, dtype):
    b, c, n, p, s = [(2, 3, 10, 4, 3), (2, 17, 500, 128, 16), (1, 70, 40, 100, 32)][size]  # 70: two channel slabs
    return Sample((random_features((b, c, n), dtype, seed), random_indices((b, p, s), n, seed)))


def _stack_cuda(seed, size, dtype):
    fcnt, icnt, c, s = [([5, 7], [3, 4], 3, 3), ([300, 1, 200], [50, 7, 90], 19, 16), ([20], [400], 8, 32)][size]
    return Sample(stacked_inputs(fcnt, icnt, c, s, dtype, seed))


class _GatherNet(torch.nn.Module):
    def forward(self, features: torch.Tensor, indices: torch.Tensor):
        return mmops.gather_points(features * 2.0, indices).sin(), gather(features, indices)


class _GroupNet(torch.nn.Module):
    def forward(self, features: torch.Tensor, indices: torch.Tensor):
        return mmops.grouping_operation(features * 2.0, indices).sin().sum(-1), group(features, indices)


class _StackNet(torch.nn.Module):
    def forward(self, features: torch.Tensor, fcnt: torch.Tensor, indices: torch.Tensor, icnt: torch.Tensor):
        return mmops.grouping_operation(features * 2.0, indices, fcnt, icnt).sin(), stack(features, fcnt, indices, icnt)


def _gather_helpers(sample):
    f, idx = sample.args
    return [(torch.ops.mmops._gather_points_backward, (torch.randn_like(gather(f, idx)), idx, f.shape[2]))]


def _group_helpers(sample):
    f, idx = sample.args
    return [(torch.ops.mmops._group_points_backward, (torch.randn_like(group(f, idx)), idx, f.shape[2]))]


def _stack_helpers(sample):
    f, fcnt, idx, icnt = sample.args
    go = torch.randn_like(stack(*sample.args))
    return [(torch.ops.mmops._stack_group_points_backward, (go, fcnt, idx, icnt, f.shape[0]))]


def _batched_bad(op_name, idx_rank):
    msg = f"mmops::{op_name}: .*"
    return {
        "features_2d": BadInput(lambda f, i: (f[0], i), msg + "features to be a 3-D tensor", meta=True),
        "int_features": BadInput(lambda f, i: (f.int(), i), msg + "floating point dtype, but got Int", meta=True),
        "int64_indices": BadInput(lambda f, i: (f, i.long()), msg + r"indices to be int32 \(as mmcv\)", meta=True),
        "indices_rank": BadInput(lambda f, i: (f, i[..., 0]), msg + f"indices to be a {idx_rank}-D tensor", meta=True),
        "batch_mismatch": BadInput(lambda f, i: (f[:1], i), msg + "indices to have the batch size", meta=True),
        "index_n": BadInput(lambda f, i: (f, i.clone().fill_(f.shape[2])), msg + r"every value of indices in \[0, "),
        "index_negative": BadInput(lambda f, i: (f, i.clone().fill_(-1)), msg + r"but got values in \[-1, -1\]"),
        "indices_on_cpu": BadInput(
            lambda f, i: (f.cuda(), i), msg + "indices on the device of the features", cuda=True
        ),
    }


def _with(args, position, value):
    args = list(args)
    args[position] = value
    return tuple(args)


_SMSG = "mmops::stack_group_points: .*"


def _case(name, op, sample, empty, module, helpers, cuda_make, **kw):
    """A case of the three ops: float64 CPU tests, exact CUDA == CPU in every dtype."""
    return ConformanceCase(
        name,
        op,
        sample,
        dtype=torch.float64,
        dtypes=DTYPES,
        grad_args=(0,),
        empty=empty,
        module=module,
        helpers=helpers,
        cuda_samples=_cuda_samples(cuda_make),
        cuda_tol=lambda *_: dict(rtol=0, atol=0),
        nonzero_grads=True,
        **kw,
    )


CONFORMANCE = [
    _case(
        "gather_points",
        gather,
        _gather_sample,
        _gather_empty,
        _GatherNet,
        _gather_helpers,
        _gather_cuda,
        bad_inputs=_batched_bad("gather_points", 2),
    ),
    _case(
        "group_points",
        group,
        _group_sample,
        _group_empty,
        _GroupNet,
        _group_helpers,
        _group_cuda,
        bad_inputs=_batched_bad("group_points", 3),
    ),
    _case(
        "stack_group_points",
        stack,
        _stack_sample,
        _stack_empty,
        _StackNet,
        _stack_helpers,
        _stack_cuda,
        bad_inputs={
            "features_3d": BadInput(lambda *a: _with(a, 0, a[0][None]), _SMSG + "features to be a 2-D", meta=True),
            "int64_counts": BadInput(
                lambda *a: _with(a, 1, a[1].long()), _SMSG + "features_batch_cnt to be int32", meta=True
            ),
            "counts_2d": BadInput(
                lambda *a: _with(a, 3, a[3][None]), _SMSG + "indices_batch_cnt to be a 1-D", meta=True
            ),
            "batch_sizes_differ": BadInput(
                lambda *a: _with(a, 3, a[3][:1]), _SMSG + "of one batch size, but got", meta=True
            ),
            "feature_counts_sum": BadInput(
                lambda *a: _with(a, 1, a[1] + 1), _SMSG + "features_batch_cnt to sum to the"
            ),
            "index_counts_sum": BadInput(lambda *a: _with(a, 3, a[3] * 2), _SMSG + "indices_batch_cnt to sum to the"),
            "negative_count": BadInput(
                lambda *a: _with(a, 1, a[1] * torch.tensor([-1] + [1] * (len(a[1]) - 1), dtype=torch.int32)),
                _SMSG + "counts >= 0",
            ),
            "index_outside_batch": BadInput(
                lambda *a: _with(a, 2, a[2].clone().fill_(int(a[1][0]))), _SMSG + "every index of batch 0 in"
            ),
        },
    ),
]


class TestGroupPointsConformance(ConformanceSuite):
    cases = CONFORMANCE


# ----------------------------------------------------------------------------- values


def _fwd_bwd(op, features, *rest):
    x = features.detach().requires_grad_(True)
    out = op(x, *rest)
    go = random_features(out.shape, out.dtype, seed=9)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g, go


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gather_and_group_match_reference(dtype):
    for b, c, n, shape in ((1, 1, 1, (3,)), (2, 5, 9, (20,)), (3, 4, 30, (6, 5)), (2, 3, 7, (4, 16))):
        f = random_features((b, c, n), dtype, seed=n)
        idx = random_indices((b, *shape), n, seed=n)
        op = gather if len(shape) == 1 else group
        out, g, go = _fwd_bwd(op, f, idx)
        exp, gexp = gather_ref(f, idx, go)
        assert out.shape == exp.shape and g.abs().sum() > 0
        torch.testing.assert_close(out, exp.to(dtype), rtol=0, atol=0)  # a copy is exact
        torch.testing.assert_close(g, gexp.to(dtype), rtol=1e-6 if dtype == torch.float32 else 1e-12, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_stack_matches_reference(dtype):
    for fcnt, icnt, c, s in (([5, 7], [3, 4], 3, 3), ([1, 9, 4], [2, 0, 6], 5, 8), ([6], [1], 1, 1)):
        f, fc, idx, ic = stacked_inputs(fcnt, icnt, c, s, dtype, seed=sum(fcnt))
        out, g, go = _fwd_bwd(stack, f, fc, idx, ic)
        exp, gexp = stack_ref(f, fc, idx, ic, go)
        assert out.shape == (sum(icnt), c, s) and g.shape == f.shape
        torch.testing.assert_close(out.double(), exp, rtol=0, atol=0)
        tol = dict(rtol=1e-6, atol=1e-6) if dtype in (torch.float32, torch.float64) else dict(rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(g.double(), gexp, **tol)
        wrapped = mmops.grouping_operation(f, idx, fc, ic)
        assert torch.equal(wrapped, out.detach())


def test_low_precision_gradients_accumulate_in_float():
    # 300 equal contributions of 1/3 to one point: bfloat16 sums stepwise would stall at 64
    f = torch.zeros(1, 1, 2, dtype=torch.bfloat16, requires_grad=True)
    idx = torch.zeros(1, 300, dtype=torch.int32)
    (g,) = torch.autograd.grad(gather(f, idx), f, torch.full((1, 1, 300), 1 / 3, dtype=torch.bfloat16))
    assert g[0, 0, 0].item() == pytest.approx(300 * float(torch.tensor(1 / 3, dtype=torch.bfloat16)), rel=1e-2)
    assert g[0, 0, 1].item() == 0


def test_gradcheck():
    f = random_features((2, 3, 6)).requires_grad_(True)
    idx = random_indices((2, 4, 3), 6, seed=1)
    assert torch.autograd.gradcheck(lambda x: group(x, idx), (f,))
    assert torch.autograd.gradcheck(lambda x: gather(x, idx[:, :, 0]), (f,))
    sf, fc, sidx, ic = stacked_inputs([4, 5], [2, 3], 3, 4)
    assert torch.autograd.gradcheck(lambda x: stack(x, fc, sidx, ic), (sf.requires_grad_(True),))


# mmcv's tests/test_ops/test_gather_points.py (batch 0) and test_group_points.py (batch 1, channel 1)
MMCV_GATHER_FEATURES = [
    [-1.6095, -0.1029, -0.8876, -1.2447, -2.4031, 0.3708, -1.1586, -1.4967, -0.4800, 0.2252],
    [1.9138, 3.4979, 1.6854, 1.5631, 3.6776, 3.1154, 2.1705, 2.5221, 2.0411, 3.1446],
    [-1.4173, 0.3073, -1.4339, -1.4340, -1.2770, -0.2867, -1.4162, -1.4044, -1.4245, -1.4074],
]
MMCV_GATHER_EXPECTED = [
    [-1.6095, -0.1029, -2.4031, -1.6095, -1.6095, -1.6095],
    [1.9138, 3.4979, 3.6776, 1.9138, 1.9138, 1.9138],
    [-1.4173, 0.3073, -1.2770, -1.4173, -1.4173, -1.4173],
]
MMCV_GROUP_FEATURES = [1.1773, 1.5009, 2.6399, 5.9242, 1.0962, 2.7346, 6.0865, 1.5555, 4.3303, 2.8229]
MMCV_GROUP_EXPECTED = [1.1773, 6.0865, 2.8229, 1.1773, 1.1773, 1.1773]


def test_mmcv_known_vectors():
    out = mmops.gather_points(torch.tensor([MMCV_GATHER_FEATURES]), torch.tensor([[0, 1, 4, 0, 0, 0]]).int())
    assert torch.equal(out, torch.tensor([MMCV_GATHER_EXPECTED]))
    idx = torch.tensor([[[0] * 3, [6] * 3, [9] * 3, [0] * 3, [0] * 3, [0] * 3]]).int()
    out = mmops.grouping_operation(torch.tensor([[MMCV_GROUP_FEATURES]]), idx)
    assert torch.equal(out, torch.tensor(MMCV_GROUP_EXPECTED)[None, None, :, None].expand(1, 1, 6, 3))


def test_non_finite_features_are_copied():
    f = torch.tensor([[[float("nan"), float("inf"), -float("inf"), 1.0]]])
    out = gather(f, torch.tensor([[3, 2, 1, 0]]).int())
    assert out[0, 0, :3].tolist() == [1.0, -float("inf"), float("inf")] and out[0, 0, 3].isnan()


def test_strided_inputs():
    f = random_features((2, 8, 9))
    idx = random_indices((2, 6, 4), 9, seed=3)
    fs, idxs = f[:, ::2], idx.transpose(1, 2).contiguous().transpose(1, 2)
    assert not fs.is_contiguous() and not idxs.is_contiguous()
    assert torch.equal(group(fs, idxs), group(fs.contiguous(), idx))


def test_group_all():
    xyz, feats = random_features((2, 5, 3)), random_features((2, 4, 5), seed=1)
    out = mmops.GroupAll()(xyz, None, feats)
    assert out.shape == (2, 7, 1, 5)
    assert torch.equal(out[:, :3, 0], xyz.transpose(1, 2)) and torch.equal(out[:, 3:, 0], feats)
    assert torch.equal(mmops.GroupAll(use_xyz=False)(xyz, None, feats), feats.unsqueeze(2))
    assert torch.equal(mmops.GroupAll()(xyz, None), xyz.transpose(1, 2).unsqueeze(2))
    scripted = torch.jit.script(mmops.GroupAll())
    assert torch.equal(scripted(xyz, None, feats), out)


def test_double_backward_refused():
    f = random_features((1, 2, 5)).requires_grad_(True)
    idx = random_indices((1, 3), 5)
    go = torch.randn(1, 2, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        (g,) = torch.autograd.grad(gather(f, idx), f, go, create_graph=True)
        g.sum().backward()


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
def test_cuda_out_of_range_indices_are_guarded():
    f = random_features((2, 3, 6), torch.float32, device="cuda").requires_grad_(True)
    idx = torch.tensor([[0, 6, -1, 2], [100, 5, 5, -7]], dtype=torch.int32, device="cuda")
    for idx in (idx, idx.repeat(1, 3)):  # K < N: a thread per k; K >= N: channel rows per k
        out = gather(f, idx)
        bad = (idx < 0) | (idx >= 6)
        assert (out.detach().permute(1, 0, 2)[:, bad] == 0).all()
        (g,) = torch.autograd.grad(out, f, torch.ones_like(out))
        assert g.sum().item() == (~bad).sum().item() * 3  # only valid indices receive gradient
    with strict_index_check(True), pytest.raises(RuntimeError, match="every value of indices"):
        gather(f, idx)
    sf, fc, sidx, ic = stacked_inputs([4, 5], [2, 3], 3, 4, torch.float32, device="cuda")
    sidx[0, 0] = 4  # outside batch 0
    assert (stack(sf, fc, sidx, ic)[0, :, 0] == 0).all()
    with strict_index_check(True), pytest.raises(RuntimeError, match="every index of batch 0"):
        stack(sf, fc, sidx, ic)


@pytest.mark.cuda
def test_cuda_backward_deterministic_bitwise():
    f = random_features((4, 64, 512), torch.float32, device="cuda").requires_grad_(True)
    idx = random_indices((4, 256, 32), 64, device="cuda")  # heavy repetition
    go = random_features((4, 64, 256, 32), torch.float32, device="cuda")
    runs = [torch.autograd.grad(group(f, idx), f, go)[0] for _ in range(3)]
    assert all(torch.equal(runs[0], r) for r in runs[1:])
    fc = f.detach().cpu().requires_grad_(True)
    (gc,) = torch.autograd.grad(group(fc, idx.cpu()), fc, go.cpu())
    assert torch.equal(runs[0].cpu(), gc)  # the same order of additions as the CPU kernel


# ----------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    f = random_features((2, 3, 9), torch.float32).requires_grad_(True)
    idx = random_indices((2, 4, 5), 9)
    out = ops.grouping_operation(f, idx)
    assert torch.equal(out, group(f, idx)) and out.requires_grad
    assert torch.equal(ops.gather_points(f, idx[:, :, 0]), gather(f, idx[:, :, 0]))
    sf, fc, sidx, ic = stacked_inputs([4, 5], [2, 3], 3, 4, torch.float32)
    assert torch.equal(ops.grouping_operation(sf, sidx, fc, ic), stack(sf, fc, sidx, ic))
    assert torch.equal(
        ops.GroupAll()(f.detach().transpose(1, 2)[..., :3], None),
        mmops.GroupAll()(f.detach().transpose(1, 2)[..., :3], None),
    )
