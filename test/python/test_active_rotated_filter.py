"""Tests of mmops::active_rotated_filter: the conformance cases, then the float64
reference, mmcv's known vectors, gradcheck, index tables and the mmcv bridge."""

import importlib

import pytest
import torch
from active_rotated_filter_reference import active_rotated_filter_ref, orn_indices
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, deterministic_algorithms, strict_index_check

import mmops

op = torch.ops.mmops.active_rotated_filter


def permutation_indices(o, h, w, r, generator=None, dtype=torch.int32):
    """[o, h, w, r]: for every rotation a random permutation of 1..o*h*w."""
    e = o * h * w
    cols = [torch.randperm(e, generator=generator) + 1 for _ in range(r)]
    return torch.stack(cols, -1).reshape(o, h, w, r).to(dtype)


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    (op_, ip, o, k, r) = (6, 2, 4, 3, 5) if size == 0 else (7, 3, 2, 4, 6)  # no two sizes equal
    g = torch.Generator().manual_seed(40 + size)
    x = torch.randn(op_, ip, o, k, k, dtype=torch.float64, generator=g).to(dtype)
    idx = permutation_indices(o, k, k, r, g)
    return Sample((x.to(device), idx.to(device)))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    idx = permutation_indices(2, 3, 3, 4).to(device)
    return [
        Sample((torch.randn(0, 3, 2, 3, 3, **f), idx), out_shapes=[(0, 6, 3, 3)]),
        Sample((torch.randn(2, 0, 2, 3, 3, **f), idx), out_shapes=[(8, 0, 3, 3)]),
        Sample((torch.randn(2, 3, 2, 3, 3, **f), idx[..., :0]), out_shapes=[(0, 6, 3, 3)]),
    ]


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.arf = mmops.ActiveRotatedFilter()

    def forward(self, x: torch.Tensor, indices: torch.Tensor):
        both = self.arf(x * 2.0, indices).sin() + mmops.active_rotated_filter(x, indices)
        return both, torch.ops.mmops.active_rotated_filter(x * 0.5, indices)


def _helpers(sample):
    x, idx = sample.args
    out = op(x, idx)
    return [(torch.ops.mmops._active_rotated_filter_backward, (torch.randn_like(out), idx, list(x.shape)))]


def _message(text):
    return f"mmops::active_rotated_filter: .*{text}"


def _with_value(idx, value):
    idx = idx.clone()
    idx.view(-1)[3] = value
    return idx


CONFORMANCE = [
    ConformanceCase(
        "active_rotated_filter",
        op,
        _sample,
        grad_args=(0,),
        nonzero_grads=True,
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        bad_inputs={
            "input_4d": BadInput(lambda x, i: (x[0], i), _message("input"), meta=True),
            "int_input": BadInput(lambda x, i: (x.int(), i), _message("input"), meta=True),
            "indices_3d": BadInput(lambda x, i: (x, i[0]), _message("indices"), meta=True),
            "float_indices": BadInput(lambda x, i: (x, i.float()), _message("indices"), meta=True),
            "indices_orientations": BadInput(lambda x, i: (x, i[1:]), _message("indices"), meta=True),
            "indices_kernel": BadInput(lambda x, i: (x, i[:, 1:]), _message("indices"), meta=True),
            **{
                f"index_{v}": BadInput(lambda x, i, v=v: (x, _with_value(i, v)), _message("every value of indices"))
                for v in (0, -1, 37, 1000)
            },
        },
    ),
]


class TestActiveRotatedFilterConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def grad_of(x, idx, go):
    x = x.detach().requires_grad_(True)
    out = op(x, idx)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


def ref_grad_of(x, idx, go):
    xd = x.detach().double().requires_grad_(True)
    out = active_rotated_filter_ref(xd, idx)
    (g,) = torch.autograd.grad(out, xd, go.double())
    return out.detach(), g


SHAPES = [(1, 1, 1, 3, 8), (4, 3, 8, 3, 8), (2, 5, 4, 1, 4), (3, 2, 2, 5, 3)]  # (op, ip, o, k, r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64, torch.uint8])
def test_matches_reference(dtype, index_dtype):
    g = torch.Generator().manual_seed(1)
    for op_, ip, o, k, r in SHAPES:
        x = torch.randn(op_, ip, o, k, k, generator=g).to(dtype)
        idx = permutation_indices(o, k, k, r, g, index_dtype)
        go = torch.randn(op_ * r, ip * o, k, k, generator=g).to(dtype)
        out, grad = grad_of(x, idx, go)
        exp, gexp = ref_grad_of(x, idx, go)
        assert out.dtype == dtype and out.shape == (op_ * r, ip * o, k, k)
        torch.testing.assert_close(out.double(), exp, rtol=0, atol=0)  # a copy
        torch.testing.assert_close(grad.double(), gexp, **TOL[dtype])


def test_orn_tables():
    """ORN's tables (rotated grids, shifted orientations) against the reference."""
    g = torch.Generator().manual_seed(2)
    for o, k, r in ((8, 3, 8), (4, 3, 4), (1, 3, 8), (8, 1, 8)):
        idx = orn_indices(o, k, r)
        x = torch.randn(5, 3, o, k, k, dtype=torch.float64, generator=g)
        go = torch.randn(5 * r, 3 * o, k, k, dtype=torch.float64, generator=g)
        out, grad = grad_of(x, idx, go)
        exp, gexp = ref_grad_of(x, idx, go)
        torch.testing.assert_close(out, exp, rtol=0, atol=0)
        torch.testing.assert_close(grad, gexp, **TOL[torch.float64])


def test_duplicate_targets_largest_entry_wins():
    """A table that is not a permutation: a target written twice keeps the largest entry l
    (mmcv's CPU loop order); a target never written is 0; the gradient goes to the winner only."""
    idx = torch.tensor([[[[1, 2]], [[1, 1]], [[3, 1]]]], dtype=torch.int32)  # [1, 3, 1, 2]: E = 3, R = 2
    x = torch.tensor([10.0, 20.0, 30.0], dtype=torch.float64).reshape(1, 1, 1, 3, 1).requires_grad_(True)
    out = op(x, idx)
    # rotation 0: l=0 -> 0, l=1 -> 0, l=2 -> 2 ; rotation 1: l=0 -> 1, l=1 -> 0, l=2 -> 0
    torch.testing.assert_close(
        out.reshape(2, 3), torch.tensor([[20.0, 0.0, 30.0], [30.0, 10.0, 0.0]], dtype=torch.float64)
    )
    go = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=torch.float64).reshape(2, 1, 3, 1)
    (g,) = torch.autograd.grad(out, x, go)
    torch.testing.assert_close(g.reshape(3), torch.tensor([5.0, 1.0, 7.0], dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda t: op(t, idx), (x,))


def test_gradcheck():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 2, 4, 3, 3, dtype=torch.float64, generator=g, requires_grad=True)
    idx = orn_indices(4, 3, 4)
    assert torch.autograd.gradcheck(lambda t: op(t, idx), (x,), fast_mode=True)
    assert torch.autograd.gradcheck(lambda t: op(t, idx.long()), (x,), fast_mode=True)


def test_strided_inputs():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(6, 3, 2, 3, 3, generator=g)[::2]
    idx = permutation_indices(2, 3, 3, 4, g).repeat_interleave(2, dim=2)[:, :, ::2]  # strided
    torch.testing.assert_close(op(x, idx), op(x.contiguous(), idx.contiguous()), rtol=0, atol=0)


def test_deterministic_mode_runs():
    x = torch.randn(2, 2, 4, 3, 3, requires_grad=True)
    idx = orn_indices(4, 3, 4)
    with deterministic_algorithms():
        op(x, idx).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_autocast_runs_in_float32():
    x = torch.randn(3, 2, 4, 3, 3).bfloat16()
    idx = orn_indices(4, 3, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x, idx)
    assert out.dtype == torch.bfloat16 and torch.equal(out, op(x.float(), idx).bfloat16())


def test_double_backward_refused():
    x = torch.randn(1, 1, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    go = torch.randn(2, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(x, orn_indices(2, 3, 2)), x, go, create_graph=True)


def test_cpu_index_error_names_the_range():
    idx = orn_indices(2, 3, 2)
    idx[0, 0, 0, 1] = 19
    with pytest.raises(RuntimeError, match=r"in \[1, 18\].*got values in \[1, 19\]"):
        op(torch.randn(1, 1, 2, 3, 3), idx)


# --------------------------------------------------------------------------- mmcv's vectors

# tests/test_ops/test_active_rotated_filter.py of mmcv: input [8, 1, 1, 3, 3], indices [1, 3, 3, 8]
MMCV_FEATURE = [
    [[-1.4934e-01, 1.1341e00, -1.6241e-01], [-1.0986e00, -1.1463e00, -1.3176e00], [1.4808e00, 7.6572e-01, -1.4548e00]],
    [[1.9370e00, 6.2799e-01, 2.5834e-02], [-1.4242e00, 7.6566e-01, 1.0015e00], [9.8669e-01, 4.1356e-01, 6.1068e-01]],
    [[1.4565e00, 1.4960e00, 2.4339e-01], [-2.2484e-01, 7.5942e-01, -8.1184e-01], [-1.7077e00, 1.0658e00, 3.8311e-01]],
    [[8.4734e-01, 1.0904e00, 2.4356e00], [9.5822e-01, 2.2260e-01, -2.4450e-01], [-1.5078e00, 7.0902e-02, -1.5921e00]],
    [[2.1173e00, -7.3524e-01, 1.8888e00], [1.0169e00, 4.7033e-01, -1.0875e00], [-1.0736e00, -5.2245e-01, -2.8733e-01]],
    [[-5.6433e-01, 1.5835e00, -1.5826e00], [-8.8974e-01, -4.3128e-01, -2.2423e-01],
     [1.6552e-03, -1.7292e00, 2.6639e-01]],
    [[-1.2951e-01, 1.3493e00, -1.9329e00], [5.6248e-01, -5.1189e-01, 1.3614e00], [3.3680e-01, -8.7148e-01, 5.0592e-01]],
    [[1.6781e-02, -8.3929e-01, 1.2060e00], [-1.0764e00, 4.7821e-01, 1.5342e00], [-4.4542e-01, -1.8606e00, 3.0827e-01]],
]  # fmt: skip
MMCV_INDICES = [
    [[1, 2, 3, 6, 9, 8, 7, 4], [2, 3, 6, 9, 8, 7, 4, 1], [3, 6, 9, 8, 7, 4, 1, 2]],
    [[4, 1, 2, 3, 6, 9, 8, 7], [5, 5, 5, 5, 5, 5, 5, 5], [6, 9, 8, 7, 4, 1, 2, 3]],
    [[7, 4, 1, 2, 3, 6, 9, 8], [8, 7, 4, 1, 2, 3, 6, 9], [9, 8, 7, 4, 1, 2, 3, 6]],
]  # fmt: skip
# the first 8 output planes of mmcv's expected output (the 8 rotations of filter 0)
MMCV_OUTPUT_FILTER0 = [
    [[-1.4934e-01, 1.1341e00, -1.6241e-01], [-1.0986e00, -1.1463e00, -1.3176e00], [1.4808e00, 7.6572e-01, -1.4548e00]],
    [[-1.0986e00, -1.4934e-01, 1.1341e00], [1.4808e00, -1.1463e00, -1.6241e-01], [7.6572e-01, -1.4548e00, -1.3176e00]],
    [[1.4808e00, -1.0986e00, -1.4934e-01], [7.6572e-01, -1.1463e00, 1.1341e00], [-1.4548e00, -1.3176e00, -1.6241e-01]],
    [[7.6572e-01, 1.4808e00, -1.0986e00], [-1.4548e00, -1.1463e00, -1.4934e-01], [-1.3176e00, -1.6241e-01, 1.1341e00]],
    [[-1.4548e00, 7.6572e-01, 1.4808e00], [-1.3176e00, -1.1463e00, -1.0986e00], [-1.6241e-01, 1.1341e00, -1.4934e-01]],
    [[-1.3176e00, -1.4548e00, 7.6572e-01], [-1.6241e-01, -1.1463e00, 1.4808e00], [1.1341e00, -1.4934e-01, -1.0986e00]],
    [[-1.6241e-01, -1.3176e00, -1.4548e00], [1.1341e00, -1.1463e00, 7.6572e-01], [-1.4934e-01, -1.0986e00, 1.4808e00]],
    [[1.1341e00, -1.6241e-01, -1.3176e00], [-1.4934e-01, -1.1463e00, -1.4548e00], [-1.0986e00, 1.4808e00, 7.6572e-01]],
]  # fmt: skip
# the last 8 output planes (filter 7)
MMCV_OUTPUT_FILTER7 = [
    [[1.6781e-02, -8.3929e-01, 1.2060e00], [-1.0764e00, 4.7821e-01, 1.5342e00], [-4.4542e-01, -1.8606e00, 3.0827e-01]],
    [[-1.0764e00, 1.6781e-02, -8.3929e-01], [-4.4542e-01, 4.7821e-01, 1.2060e00], [-1.8606e00, 3.0827e-01, 1.5342e00]],
    [[-4.4542e-01, -1.0764e00, 1.6781e-02], [-1.8606e00, 4.7821e-01, -8.3929e-01], [3.0827e-01, 1.5342e00, 1.2060e00]],
    [[-1.8606e00, -4.4542e-01, -1.0764e00], [3.0827e-01, 4.7821e-01, 1.6781e-02], [1.5342e00, 1.2060e00, -8.3929e-01]],
    [[3.0827e-01, -1.8606e00, -4.4542e-01], [1.5342e00, 4.7821e-01, -1.0764e00], [1.2060e00, -8.3929e-01, 1.6781e-02]],
    [[1.5342e00, 3.0827e-01, -1.8606e00], [1.2060e00, 4.7821e-01, -4.4542e-01], [-8.3929e-01, 1.6781e-02, -1.0764e00]],
    [[1.2060e00, 1.5342e00, 3.0827e-01], [-8.3929e-01, 4.7821e-01, -1.8606e00], [1.6781e-02, -1.0764e00, -4.4542e-01]],
    [[-8.3929e-01, 1.2060e00, 1.5342e00], [1.6781e-02, 4.7821e-01, 3.0827e-01], [-1.0764e00, -4.4542e-01, -1.8606e00]],
]  # fmt: skip


def _mmcv_vectors(device="cpu"):
    x = torch.tensor(MMCV_FEATURE, device=device).reshape(8, 1, 1, 3, 3)
    idx = torch.tensor(MMCV_INDICES, dtype=torch.int, device=device).reshape(1, 3, 3, 8)
    return x, idx


def _check_mmcv_vectors(fn, device):
    x, idx = _mmcv_vectors(device)
    x.requires_grad_(True)
    out = fn(x, idx)
    out.backward(torch.ones_like(out))
    assert out.shape == (64, 1, 3, 3)
    torch.testing.assert_close(out[:8, 0].cpu(), torch.tensor(MMCV_OUTPUT_FILTER0), rtol=0, atol=1e-3)
    torch.testing.assert_close(out[56:, 0].cpu(), torch.tensor(MMCV_OUTPUT_FILTER7), rtol=0, atol=1e-3)
    torch.testing.assert_close(x.grad.cpu(), torch.full((8, 1, 1, 3, 3), 8.0), rtol=0, atol=1e-3)  # mmcv's grad


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_mmcv_known_vectors(device):
    _check_mmcv_vectors(mmops.active_rotated_filter, device)


def test_mmcv_vectors_match_reference():
    x, idx = _mmcv_vectors()
    torch.testing.assert_close(op(x, idx), active_rotated_filter_ref(x, idx).float(), rtol=0, atol=0)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
def test_cuda_out_of_range_indices_are_guarded():
    """Unchecked CUDA ignores an out-of-range index (it writes nowhere): its target keeps no
    source (0) unless another entry writes it; the strict switch raises instead."""
    x = torch.randn(2, 3, 2, 3, 3, device="cuda")
    idx = orn_indices(2, 3, 2).cuda()
    bad = idx.clone()
    for v in (0, -5, 19, 2**20):
        bad.view(-1)[1] = v
        out = op(x, bad)
        good = op(x, idx)
        m = int(idx.view(-1)[1]) - 1  # entry 0, rotation 1 lost its write
        mask = torch.ones(18, dtype=torch.bool)
        mask[m] = False
        o4, g4 = out.view(2, 2, 3, 18), good.view(2, 2, 3, 18)
        torch.testing.assert_close(o4[:, 1][..., mask], g4[:, 1][..., mask], rtol=0, atol=0)
        assert (o4[:, 1][..., m] == 0).all()
        torch.testing.assert_close(o4[:, 0], g4[:, 0], rtol=0, atol=0)
        with strict_index_check(True), pytest.raises(RuntimeError, match="every value of indices"):
            op(x, bad)


@pytest.mark.cuda
def test_cuda_deterministic_bitwise():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(64, 32, 8, 3, 3, generator=g).cuda().requires_grad_(True)
    idx = orn_indices(8, 3, 8).cuda()
    go = torch.randn(512, 256, 3, 3, generator=g).cuda()
    runs = [torch.autograd.grad(op(x, idx), x, go)[0] for _ in range(3)]
    assert all(torch.equal(runs[0], r) for r in runs[1:])


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_cuda_large_matches_cpu(dtype):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(70, 300, 8, 3, 3, generator=g).to(dtype)
    idx = orn_indices(8, 3, 8)
    go = torch.randn(560, 2400, 3, 3, generator=g).to(dtype)
    out, grad = grad_of(x, idx, go)
    out_c, grad_c = grad_of(x.cuda(), idx.cuda(), go.cuda())
    torch.testing.assert_close(out_c.cpu(), out, rtol=0, atol=0)
    torch.testing.assert_close(grad_c.cpu(), grad, **TOL[dtype])


# The CUDA kernels build the tables in shared memory when rotations * E <= 4096 and in global
# memory otherwise; these tests run both paths against the CPU (or, for out-of-range indices,
# which the CPU rejects, against guarded_ref).
SHARED_TABLE_SHAPES = [(5, 3, 8, 3, 8), (3, 1, 1, 1, 5), (9, 7, 1, 3, 3), (2, 40, 3, 2, 7)]  # (op, ip, o, k, r)
GLOBAL_TABLE_SHAPES = [(3, 2, 8, 5, 24), (2, 3, 5, 7, 17)]  # R * E = 4800, 4165


def random_indices(o, h, w, r, generator, dtype=torch.int64):
    """[o, h, w, r] values drawn with repeats from 1..E: targets written twice or never."""
    return torch.randint(1, o * h * w + 1, (o, h, w, r), generator=generator).to(dtype)


def guarded_ref(x, idx):
    """float64 reference with CUDA's guard: an index outside [1, E] writes nowhere."""
    op_, ip, o, h, w = x.shape
    r = idx.shape[3]
    e = o * h * w
    target = idx.reshape(e, r).long() - 1
    source = torch.full((r, e), -1, dtype=torch.long)
    for l_ in range(e):  # l ascending: the largest l wins
        for k in range(r):
            m = int(target[l_, k])
            if 0 <= m < e:
                source[k, m] = l_
    g = x.double().reshape(op_, ip, e)[:, :, source.clamp(min=0)]  # [op, ip, r, e]
    out = torch.where(source >= 0, g, torch.zeros((), dtype=torch.float64))
    return out.permute(0, 2, 1, 3).reshape(op_ * r, ip * o, h, w)


def _cuda_vs_cpu(x, idx, go, dtype):
    out, grad = grad_of(x, idx, go)
    out_c, grad_c = grad_of(x.cuda(), idx.cuda(), go.cuda())
    torch.testing.assert_close(out_c.cpu(), out, rtol=0, atol=0)
    torch.testing.assert_close(grad_c.cpu(), grad, **TOL[dtype])


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("tables", ["shared", "global"])
def test_cuda_table_paths_match_cpu(dtype, tables):
    """Permutation and repeated-value tables, odd row lengths (C = 9 * 7, 40 * 12, ...), rows shorter
    than a block, on both table paths."""
    g = torch.Generator().manual_seed(7)
    for op_, ip, o, k, r in SHARED_TABLE_SHAPES if tables == "shared" else GLOBAL_TABLE_SHAPES:
        assert (r * o * k * k <= 4096) == (tables == "shared")
        for idx in (permutation_indices(o, k, k, r, g), random_indices(o, k, k, r, g)):
            x = torch.randn(op_, ip, o, k, k, generator=g).to(dtype)
            go = torch.randn(op_ * r, ip * o, k, k, generator=g).to(dtype)
            _cuda_vs_cpu(x, idx, go, dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("index_dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("tables", ["shared", "global"])
def test_cuda_index_dtypes(index_dtype, tables):
    g = torch.Generator().manual_seed(8)
    o, k, r = (8, 3, 8) if tables == "shared" else (1, 9, 60)  # E = 72 / 81: fits int8 and uint8
    x = torch.randn(6, 5, o, k, k, generator=g)
    go = torch.randn(6 * r, 5 * o, k, k, generator=g)
    _cuda_vs_cpu(x, random_indices(o, k, k, r, g, index_dtype), go, torch.float32)


@pytest.mark.cuda
@pytest.mark.parametrize("tables", ["shared", "global"])
def test_cuda_out_of_range_guarded_on_both_paths(tables):
    """Out-of-range values mixed with repeats: output and gradient equal guarded_ref."""
    g = torch.Generator().manual_seed(9)
    o, k, r = (2, 3, 6) if tables == "shared" else (8, 5, 24)
    e = o * k * k
    idx = random_indices(o, k, k, r, g)
    flat = idx.view(-1)
    bad = torch.randperm(flat.numel(), generator=g)[: max(3, flat.numel() // 10)]
    flat[bad] = torch.tensor([0, -3, e + 1, 2**40], dtype=torch.int64).repeat(bad.numel())[: bad.numel()]
    x = torch.randn(4, 3, o, k, k, dtype=torch.float64, generator=g)
    go = torch.randn(4 * r, 3 * o, k, k, dtype=torch.float64, generator=g)
    out, grad = grad_of(x.cuda(), idx.cuda(), go.cuda())
    xr = x.clone().requires_grad_(True)
    exp = guarded_ref(xr, idx)
    (gexp,) = torch.autograd.grad(exp, xr, go)
    torch.testing.assert_close(out.cpu(), exp, rtol=0, atol=0)
    torch.testing.assert_close(grad.cpu(), gexp, **TOL[torch.float64])


@pytest.mark.cuda
def test_cuda_misaligned_input_view():
    """A weight view starting one element into its storage (no 16-byte alignment)."""
    g = torch.Generator().manual_seed(10)
    base = torch.randn(1 + 4 * 3 * 8 * 9, generator=g)
    x = base[1:].view(4, 3, 8, 3, 3)
    idx = orn_indices(8, 3, 8)
    go = torch.randn(32, 24, 3, 3, generator=g)
    out, grad = grad_of(x, idx, go)
    out_c, grad_c = grad_of(base.cuda()[1:].view(4, 3, 8, 3, 3), idx.cuda(), go.cuda())
    torch.testing.assert_close(out_c.cpu(), out, rtol=0, atol=0)
    torch.testing.assert_close(grad_c.cpu(), grad, **TOL[torch.float32])


def test_guarded_ref_matches_reference_on_valid_tables():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(3, 2, 2, 3, 3, dtype=torch.float64, generator=g)
    for idx in (random_indices(2, 3, 3, 4, g), orn_indices(2, 3, 4)):
        torch.testing.assert_close(guarded_ref(x, idx), active_rotated_filter_ref(x, idx), rtol=0, atol=0)
        torch.testing.assert_close(guarded_ref(x, idx), op(x, idx), rtol=0, atol=0)


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    arf_module = importlib.import_module("mmcv.ops.active_rotated_filter")

    _check_mmcv_vectors(ops.active_rotated_filter, "cpu")
    _check_mmcv_vectors(arf_module.ActiveRotatedFilterFunction.apply, "cpu")
    x, idx = _mmcv_vectors()
    out = x.new_zeros(64, 1, 3, 3)
    arf_module.ext_module.active_rotated_filter_forward(x, idx, out)
    torch.testing.assert_close(out, op(x, idx), rtol=0, atol=0)
    grad = torch.zeros_like(x)
    arf_module.ext_module.active_rotated_filter_backward(torch.ones_like(out), idx, grad)
    torch.testing.assert_close(grad, torch.full_like(x, 8.0), rtol=0, atol=0)
