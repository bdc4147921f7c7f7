"""Inputs and checks that test_roi_align_rotated.py and test_riroi_align_rotated.py share: the
two ops take (features, rois, out_size, spatial_scale, samples, <mode>, clockwise), so the
checks take the op and its arguments after rois."""

import importlib
import math

import pytest
import torch
from conftest import TOL, deterministic_algorithms, strict_index_check


def rotated_rois(num_rois, batch, height, width, dtype=torch.float32, spatial_scale=1.0, seed=None, device="cpu"):
    """[K, 6] (batch_index, cx, cy, w, h, theta) in image coordinates: centres over the map
    (some near or past its border), sides 0.5 to 0.7 of the map, any angle."""
    g = torch.Generator().manual_seed(seed) if seed is not None else None
    size = torch.tensor([width, height], dtype=torch.float64) / spatial_scale
    centre = (torch.rand(num_rois, 2, generator=g, dtype=torch.float64) * 1.2 - 0.1) * size
    sides = (torch.rand(num_rois, 2, generator=g, dtype=torch.float64) * 0.6 + 0.1) * size
    theta = (torch.rand(num_rois, 1, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    index = torch.randint(0, batch, (num_rois, 1), generator=g).double()
    return torch.cat([index, centre, sides, theta], 1).to(device=device, dtype=dtype)


def grad_of(fn, x, rois, go, *args, float64=False):
    """fn(x, rois, *args) and its gradient w.r.t. x for the output gradient go; float64: x and
    go in float64 first (the references)."""
    if float64:
        x, go = x.double(), go.double()
    x = x.detach().requires_grad_(True)
    out = fn(x, rois, *args)
    (g,) = torch.autograd.grad(out, x, go)
    return out.detach(), g


def check_against_reference(fn, ref, x, rois, go, args):
    """fn's output and input gradient match the float64 reference's (float32: 1e-4)."""
    out, g = grad_of(fn, x, rois, go, *args)
    exp, gexp = grad_of(ref, x, rois, go, *args, float64=True)
    assert exp.abs().sum() > 0 and gexp.abs().sum() > 0
    assert out.dtype == x.dtype and out.shape == exp.shape
    tol = TOL[x.dtype] if x.dtype == torch.float64 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.double(), exp, **tol)
    torch.testing.assert_close(g.double(), gexp, **tol)


def check_cuda_bad_batch_index(fn, channels, args):
    """Rows with a bad batch index give zeros (the others match the CPU), the backward runs,
    and the strict index check raises."""
    torch.manual_seed(10)
    x = torch.randn(2, channels, 8, 8, device="cuda", requires_grad=True)
    rois = rotated_rois(8, 2, 8, 8).cuda()
    bad = [1, 4, 6]
    for row, v in zip(bad, (-1.0, 2.0, math.nan)):
        rois[row, 0] = v
    out = fn(x, rois, *args)
    assert torch.equal(out[bad], torch.zeros_like(out[bad]))
    good = [i for i in range(8) if i not in bad]
    torch.testing.assert_close(out[good].cpu(), fn(x.detach().cpu(), rois[good].cpu(), *args))
    out.sum().backward()
    with strict_index_check(True), pytest.raises(RuntimeError, match="batch index"):
        fn(x, rois, *args)


def check_cuda_matches_cpu(fn, dtype, args_of):
    """At a detection size (64 rois, 7 x 7 bins), for samples 2 and 0 (args_of(samples): the
    arguments after rois): CUDA matches CPU float32 on the same rounded values."""
    torch.manual_seed(11)
    x = torch.randn(2, 64, 50, 84)
    rois = rotated_rois(64, 2, 50, 84)
    go = torch.randn(64, 64, 7, 7)
    for samples in (2, 0):
        args = args_of(samples)
        out, g = grad_of(fn, x.cuda().to(dtype), rois.cuda().to(dtype), go.cuda().to(dtype), *args)
        exp, gexp = grad_of(fn, *(t.to(dtype).float() for t in (x, rois, go)), *args)
        tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else TOL[dtype]
        torch.testing.assert_close(out.float().cpu(), exp, **tol)
        torch.testing.assert_close(g.float().cpu(), gexp, **dict(rtol=tol["rtol"] * 5, atol=tol["atol"] * 5))


def check_cuda_deterministic_backward(fn, args_of):
    """The deterministic backward repeats bit for bit and matches the atomic one and the CPU."""
    torch.manual_seed(14)
    x = torch.randn(2, 48, 30, 40, device="cuda")
    rois = rotated_rois(200, 2, 30, 40).cuda()
    rois[::7, 0] = 5.0  # bad batch index: no gradient
    go = torch.randn(200, 48, 7, 7, device="cuda")
    for samples in (2, 0):
        args = args_of(samples)
        _, atomic = grad_of(fn, x, rois, go, *args)
        with deterministic_algorithms():
            _, first = grad_of(fn, x, rois, go, *args)
            _, second = grad_of(fn, x, rois, go, *args)
        assert torch.equal(first, second)
        torch.testing.assert_close(first, atomic, rtol=1e-4, atol=1e-4)
        keep = rois[:, 0] < 2
        cpu = grad_of(fn, x.cpu(), rois[keep].cpu(), go[keep].cpu(), *args)[1]
        torch.testing.assert_close(first.cpu(), cpu, rtol=1e-4, atol=1e-4)


def check_mmcv_ext(name, x, rois, go, out, grad, **params):
    """mmcv._ext's <name>_forward / _backward (mmcv's contract: they fill output / grad_input)
    give out and grad exactly; params: their keyword arguments."""
    ext = importlib.import_module("mmcv._ext")
    filled = torch.zeros_like(out)
    getattr(ext, f"{name}_forward")(x, rois, filled, **params)
    torch.testing.assert_close(filled, out, rtol=0, atol=0)
    filled_grad = torch.zeros_like(x)
    getattr(ext, f"{name}_backward")(go, rois, filled_grad, **params)
    torch.testing.assert_close(filled_grad, grad, rtol=0, atol=0)
