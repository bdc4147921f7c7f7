"""CUDA tests of mmops::roi_align (all skipped without a GPU)."""
import contextlib
import math

import pytest
import torch

import mmops
from conftest import (TOL, deterministic_algorithms, random_rois, requires_cuda,
                      requires_torchvision, strict_index_check)
from roi_align_reference import roi_align_ref

op = torch.ops.mmops.roi_align

LOW_TOL = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}
CASES = [((1, 1, 5, 5), (2, 2)), ((2, 3, 7, 12), (3, 4)), ((3, 5, 20, 9), (7, 5))]


def fwd_bwd(x, rois, go, *args):
    x = x.detach().requires_grad_(True)
    out = op(x, rois, *args)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_matches_cpu(pool_mode, aligned, dtype):
    torch.manual_seed(0)
    low = dtype in LOW_TOL
    for sampling_ratio in (0, 1, 2, 3):
        for scale in (1.0, 0.5, 0.25):
            for (N, C, H, W), out_size in CASES:
                x = torch.randn(N, C, H, W).to(dtype)
                rois = random_rois(12, N, H, W, dtype=dtype, spatial_scale=scale)
                go = torch.randn(12, C, *out_size).to(dtype)
                args = (list(out_size), scale, sampling_ratio, pool_mode, aligned)
                out, g = fwd_bwd(x.cuda(), rois.cuda(), go.cuda(), *args)
                assert out.is_cuda and out.dtype == dtype and g.dtype == dtype
                if low:  # compare against the CPU float32 result of the same values
                    exp, gexp = fwd_bwd(x.float(), rois.float(), go.float(), *args)
                    torch.testing.assert_close(out.float().cpu(), exp, **LOW_TOL[dtype])
                    if pool_mode == "avg" or sampling_ratio == 1:  # no argmax near-ties
                        torch.testing.assert_close(g.float().cpu(), gexp, **LOW_TOL[dtype])
                else:
                    exp, gexp = fwd_bwd(x, rois, go, *args)
                    torch.testing.assert_close(out.cpu(), exp, **TOL[dtype])
                    torch.testing.assert_close(g.cpu(), gexp, **TOL[dtype])


@requires_cuda
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_matches_reference(pool_mode):
    torch.manual_seed(1)
    x = torch.randn(2, 4, 11, 13, dtype=torch.float64, device="cuda")
    rois = random_rois(20, 2, 11, 13, dtype=torch.float64, device="cuda", spatial_scale=0.5)
    out = op(x, rois, [3, 3], 0.5, 0, pool_mode, True)
    torch.testing.assert_close(out.cpu(), roi_align_ref(x.cpu(), rois, (3, 3), 0.5, 0, pool_mode, True),
                               **TOL[torch.float64])


@requires_cuda
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_invalid_batch_index_gives_zeros(pool_mode):
    with strict_index_check(False):
        _invalid_batch_index_gives_zeros(pool_mode)


def _invalid_batch_index_gives_zeros(pool_mode):
    torch.manual_seed(2)
    x = torch.randn(2, 3, 8, 8, device="cuda")
    rois = random_rois(8, 2, 8, 8, device="cuda")
    bad = [0, 3, 5, 6]
    for row, b in zip(bad, (-1.0, 2.0, 100.0, math.nan)):
        rois[row, 0] = b
    go = torch.randn(8, 3, 2, 2, device="cuda")
    out, g = fwd_bwd(x, rois, go, [2, 2], 1.0, 2, pool_mode, True)
    torch.cuda.synchronize()
    assert torch.equal(out[bad], torch.zeros_like(out[bad]))
    good = [i for i in range(8) if i not in bad]
    exp, gexp = fwd_bwd(x.cpu(), rois[good].cpu(), go[good].cpu(), [2, 2], 1.0, 2, pool_mode, True)
    torch.testing.assert_close(out[good].cpu(), exp, **TOL[torch.float32])
    torch.testing.assert_close(g.cpu(), gexp, **TOL[torch.float32])
    # only invalid rois: all zeros, zero gradient
    out, g = fwd_bwd(x, rois[bad], go[bad], [2, 2], 1.0, 2, pool_mode, True)
    assert torch.equal(out, torch.zeros_like(out)) and torch.equal(g, torch.zeros_like(g))


@requires_cuda
@pytest.mark.parametrize("batch_index", [-1.0, 2.0, math.nan])
def test_cuda_strict_index_check_raises(batch_index):
    x = torch.randn(2, 3, 8, 8, device="cuda")
    rois = random_rois(4, 2, 8, 8, device="cuda")
    rois[1, 0] = batch_index
    before = mmops.strict_index_check()
    with strict_index_check(True):
        assert mmops.strict_index_check() is True
        for mode in ("avg", "max"):
            with pytest.raises(RuntimeError, match="batch index"):
                op(x, rois, [2, 2], 1.0, 0, mode, True)
                torch.cuda.synchronize()
        # valid rois still work in strict mode
        rois[1, 0] = 1.0
        out = op(x, rois, [2, 2], 1.0, 0, "avg", True)
        torch.testing.assert_close(out.cpu(), op(x.cpu(), rois.cpu(), [2, 2], 1.0, 0, "avg", True),
                                   **TOL[torch.float32])
    assert mmops.strict_index_check() == before


@requires_cuda
def test_cuda_device_mismatch_raises():
    x = torch.randn(2, 3, 8, 8, device="cuda")
    rois = random_rois(4, 2, 8, 8)
    with pytest.raises(RuntimeError, match="(?i)rois|device"):
        op(x, rois, [2, 2], 1.0, 0, "avg", True)
    with pytest.raises(RuntimeError, match="(?i)rois|device|input"):
        op(x.cpu(), rois.cuda(), [2, 2], 1.0, 0, "avg", True)


@requires_cuda
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_empty_and_noncontiguous(pool_mode):
    torch.manual_seed(3)
    x = torch.randn(2, 3, 8, 10, device="cuda", requires_grad=True)
    out = op(x, torch.zeros(0, 5, device="cuda"), [2, 2], 1.0, 2, pool_mode, True)
    assert out.shape == (0, 3, 2, 2)
    (g,) = torch.autograd.grad(out.sum(), x)
    assert torch.equal(g, torch.zeros_like(x))
    out = op(torch.randn(2, 0, 8, 10, device="cuda"), random_rois(3, 2, 8, 10, device="cuda"),
             [2, 2], 1.0, 2, pool_mode, True)
    assert out.shape == (3, 0, 2, 2)

    xc = x.detach()
    rois = random_rois(9, 2, 8, 10, device="cuda", spatial_scale=0.5)
    rois_nc = torch.empty(5, 9, device="cuda").t()
    rois_nc.copy_(rois)
    go = torch.randn(9, 3, 3, 2, device="cuda")
    args = ([3, 2], 0.5, 2, pool_mode, False)
    exp, gexp = fwd_bwd(xc, rois, go, *args)
    sliced = torch.empty(2, 6, 8, 20, device="cuda")[:, ::2, :, ::2]
    sliced.copy_(xc)
    for xv in (xc.to(memory_format=torch.channels_last),
               xc.transpose(2, 3).contiguous().transpose(2, 3), sliced):
        assert not xv.is_contiguous() and torch.equal(xv, xc)
        out, g = fwd_bwd(xv, rois_nc, go.permute(3, 2, 1, 0).contiguous().permute(3, 2, 1, 0), *args)
        torch.testing.assert_close(out, exp, rtol=0, atol=0)
        torch.testing.assert_close(g, gexp, rtol=1e-6, atol=1e-6)


@requires_cuda
def test_cuda_nonfinite_rois():
    x = torch.randn(1, 2, 8, 8, device="cuda", requires_grad=True)
    rois = torch.tensor([[0, math.nan, 1, 5, 5], [0, 1, math.inf, 5, 5], [0, 1, 1, 5, -math.inf]],
                        device="cuda")
    for mode in ("avg", "max"):
        out = op(x, rois, [2, 2], 1.0, 0, mode, True)
        assert torch.equal(out, torch.zeros_like(out))
        (g,) = torch.autograd.grad(out.sum(), x)
        assert torch.equal(g, torch.zeros_like(g))


@requires_cuda
@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("aligned", [True, False])
def test_cuda_matches_torchvision(aligned, dtype):
    import torchvision

    torch.manual_seed(4)
    for sampling_ratio in (0, 1, 2, 3):
        x = torch.randn(2, 3, 12, 9, dtype=dtype, device="cuda")
        rois = random_rois(15, 2, 12, 9, dtype=dtype, device="cuda", spatial_scale=0.5,
                           ordered=True)
        go = torch.randn(15, 3, 3, 3, dtype=dtype, device="cuda")
        out, g = fwd_bwd(x, rois, go, [3, 3], 0.5, sampling_ratio, "avg", aligned)
        xt = x.clone().requires_grad_(True)
        exp = torchvision.ops.roi_align(xt, rois, (3, 3), 0.5, sampling_ratio, aligned)
        (gexp,) = torch.autograd.grad(exp, xt, go)
        torch.testing.assert_close(out, exp, **TOL[dtype])
        torch.testing.assert_close(g, gexp, **TOL[dtype])


@requires_cuda
@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_graph_capture(pool_mode, strict):
    # strict mode skips its (synchronising) check while a graph is captured
    with strict_index_check(strict):
        _graph_capture(pool_mode)


def _graph_capture(pool_mode):
    torch.manual_seed(5)
    x = torch.randn(2, 4, 16, 16, device="cuda")
    rois = random_rois(10, 2, 16, 16, device="cuda", spatial_scale=0.5)
    args = ([3, 3], 0.5, 2, pool_mode, True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            op(x, rois, *args)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = op(x, rois, *args)
    for seed in (6, 7):
        torch.manual_seed(seed)
        x.copy_(torch.randn_like(x))
        rois.copy_(random_rois(10, 2, 16, 16, device="cuda", spatial_scale=0.5))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_out, op(x, rois, *args), rtol=0, atol=0)


@requires_cuda
@pytest.mark.slow
@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_large(pool_mode, sampling_ratio):
    torch.manual_seed(8)
    # float64 for max mode so that CPU and GPU rounding cannot flip an argmax
    dtype = torch.float32 if pool_mode == "avg" else torch.float64
    x = torch.randn(2, 256, 64, 64, dtype=dtype)
    # rois in image coordinates of a 256x256 image, feature stride 4
    rois = random_rois(512, 2, 64, 64, dtype=dtype, spatial_scale=0.25, extra=False)
    go = torch.randn(512, 256, 7, 7, dtype=dtype)
    args = ([7, 7], 0.25, sampling_ratio, pool_mode, True)
    out, g = fwd_bwd(x.cuda(), rois.cuda(), go.cuda(), *args)
    exp, gexp = fwd_bwd(x, rois, go, *args)
    # fp32 sample coordinates reach 64 here (ulp 8e-6) and CPU and GPU contract
    # multiply-adds differently, so values differ by a few 1e-5 (seen: 2e-5).
    torch.testing.assert_close(out.cpu(), exp, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(g.cpu(), gexp, rtol=1e-4, atol=1e-4)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_deterministic_backward_is_bitwise_repeatable(pool_mode, dtype):
    torch.manual_seed(11)
    # many overlapping rois on a small map: lots of adds land on the same values
    x = torch.randn(2, 70, 24, 24, device="cuda").to(dtype)
    rois = random_rois(300, 2, 24, 24, device="cuda", extra=False).to(dtype)
    go = torch.randn(300, 70, 5, 5, device="cuda").to(dtype)
    args = ([5, 5], 1.0, 0, pool_mode, True)
    with deterministic_algorithms():
        grads = [fwd_bwd(x, rois, go, *args)[1] for _ in range(3)]
    for g in grads[1:]:
        assert torch.equal(g, grads[0])
    _, default = fwd_bwd(x, rois, go, *args)  # float atomics: equal up to rounding
    tol = TOL[dtype] if dtype in (torch.float32, torch.float64) else LOW_TOL[dtype]
    torch.testing.assert_close(grads[0].double(), default.double(), **tol)
    if dtype == torch.float64:
        _, cpu = fwd_bwd(x.cpu(), rois.cpu(), go.cpu(), *args)
        torch.testing.assert_close(grads[0].cpu(), cpu, rtol=1e-10, atol=1e-10)


@requires_cuda
@pytest.mark.parametrize("deterministic", [False, True])
def test_cuda_backward_nonfinite_grad_stays_local(deterministic):
    # inf in one bin of one channel reaches that bin's taps only (as on CPU)
    torch.manual_seed(15)
    x = torch.randn(1, 3, 8, 8)
    rois = torch.tensor([[0, 0.5, 0.5, 3.5, 3.5], [0, 4.0, 4.0, 7.5, 7.5]])
    go = torch.randn(2, 3, 2, 2)
    go[0, 1, 0, 0] = math.inf
    ctx = deterministic_algorithms() if deterministic else contextlib.nullcontext()
    with ctx:
        _, g = fwd_bwd(x.cuda(), rois.cuda(), go.cuda(), [2, 2], 1.0, 2, "avg", True)
    _, expected = fwd_bwd(x, rois, go, [2, 2], 1.0, 2, "avg", True)
    finite = torch.isfinite(expected)
    assert not finite[0, 1].all() and finite[0, 0].all() and finite[0, 2].all()
    assert torch.equal(torch.isfinite(g).cpu(), finite)
    torch.testing.assert_close(g.cpu()[finite], expected[finite], rtol=1e-5, atol=1e-5)


@requires_cuda
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_graph_capture_forward_and_backward(pool_mode, deterministic):
    torch.manual_seed(12)
    x = torch.randn(2, 8, 16, 16, device="cuda", requires_grad=True)
    rois = random_rois(10, 2, 16, 16, device="cuda", spatial_scale=0.5, extra=False)
    go = torch.randn(10, 8, 3, 3, device="cuda")
    args = ([3, 3], 0.5, 2, pool_mode, True)

    def step():
        out = op(x, rois, *args)
        (g,) = torch.autograd.grad(out, x, go)
        return out, g

    ctx = deterministic_algorithms() if deterministic else contextlib.nullcontext()
    with ctx:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out, static_grad = step()
        for seed in (13, 14):
            torch.manual_seed(seed)
            with torch.no_grad():
                x.copy_(torch.randn_like(x))
                rois.copy_(random_rois(10, 2, 16, 16, device="cuda", spatial_scale=0.5, extra=False))
                go.copy_(torch.randn_like(go))
            graph.replay()
            torch.cuda.synchronize()
            out, g = step()
            torch.testing.assert_close(static_out, out, rtol=0, atol=0)
            torch.testing.assert_close(static_grad, g, rtol=1e-6, atol=1e-6)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("pool_mode", ["avg", "max"])
def test_cuda_channels_last_equals_contiguous(pool_mode, dtype):
    torch.manual_seed(15)
    x = torch.randn(2, 96, 20, 28, device="cuda").to(dtype)
    rois = random_rois(40, 2, 20, 28, device="cuda", spatial_scale=0.5).to(dtype)
    go = torch.randn(40, 96, 7, 7, device="cuda").to(dtype)
    args = ([7, 7], 0.5, 2, pool_mode, True)
    out, g = fwd_bwd(x, rois, go, *args)
    out_cl, g_cl = fwd_bwd(x.contiguous(memory_format=torch.channels_last), rois, go, *args)
    assert torch.equal(out, out_cl)
    # the float atomics add in another order: rounding differs, in the last bit of 16-bit types
    tol = TOL[dtype] if dtype == torch.float32 else LOW_TOL[dtype]
    torch.testing.assert_close(g, g_cl, **tol)


@requires_cuda
@pytest.mark.parametrize("channels", [1, 3, 33, 65])
def test_cuda_odd_channel_counts(channels):
    # channel chunks of 32 (64 for 16-bit types) with a partial last chunk, and
    # the scalar path for odd counts of 16-bit channels
    torch.manual_seed(16)
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(2, channels, 9, 11, device="cuda").to(dtype)
        rois = random_rois(7, 2, 9, 11, device="cuda").to(dtype)
        go = torch.randn(7, channels, 3, 2, device="cuda").to(dtype)
        for pool_mode in ("avg", "max"):
            args = ([3, 2], 1.0, 0, pool_mode, True)
            out, g = fwd_bwd(x, rois, go, *args)
            exp, gexp = fwd_bwd(x.float().cpu(), rois.float().cpu(), go.float().cpu(), *args)
            tol = TOL[torch.float32] if dtype == torch.float32 else LOW_TOL[dtype]
            torch.testing.assert_close(out.float().cpu(), exp, **tol)
            if pool_mode == "avg" or dtype == torch.float32:
                torch.testing.assert_close(g.float().cpu(), gexp, **tol)
