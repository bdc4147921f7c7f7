"""Autocast: under torch.autocast every mmops op runs its float16 / bfloat16 tensor arguments
in float32 (float64 ones untouched), as torchvision's autocast kernels of roi_align, roi_pool
and deform_conv2d do. Floating results come back in the dtype of the op's data argument (its
first floating tensor: input, features, boxes, value); the focal losses stay float32, as
torch.autocast's losses. So each call equals the eager float32 call on the same values, cast."""

import pytest
import torch

ops = torch.ops.mmops

# (device, the lower-precision dtype autocast uses there)
DEVICES = [
    pytest.param("cpu", torch.bfloat16, id="cpu-bf16"),
    pytest.param("cuda", torch.float16, id="cuda-fp16", marks=pytest.mark.cuda),
    pytest.param("cuda", torch.bfloat16, id="cuda-bf16", marks=pytest.mark.cuda),
]


def rois(k, batch, size, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(k, 2, generator=g) * size * 0.6
    wh = torch.rand(k, 2, generator=g) * size * 0.4 + 1
    idx = torch.randint(0, batch, (k, 1), generator=g).float()
    return torch.cat([idx, xy, xy + wh], 1).to(device)


def boxes(n, device, seed=1):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 50
    return torch.cat([xy, xy + torch.rand(n, 2, generator=g) * 20 + 1], 1).to(device)


def beziers(r):
    """[K, 17] straight-line Bezier rois along the top and bottom edges of [K, 5] rois."""
    t = torch.tensor([0.0, 1 / 3, 2 / 3, 1.0], device=r.device)
    xs = r[:, 1:2] + (r[:, 3:4] - r[:, 1:2]) * t
    top = torch.stack([xs, r[:, 2:3].expand_as(xs)], -1).reshape(-1, 8)
    bottom = torch.stack([xs, r[:, 4:5].expand_as(xs)], -1).flip(1).reshape(-1, 8)
    return torch.cat([r[:, :1], top, bottom], 1)


def randn(*shape, device, seed=2):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device)


def calls(device, low):
    """(name, fn(*tensors), tensors with the data argument in `low`, result dtype under autocast)."""
    x = randn(2, 8, 12, 14, device=device).to(low)
    r = rois(6, 2, 12, device)
    offset = randn(2, 18, 12, 14, device=device, seed=3) * 0.5
    mask = torch.sigmoid(randn(2, 9, 12, 14, device=device, seed=4))
    weight = randn(4, 8, 3, 3, device=device, seed=5) * 0.1
    shapes = torch.tensor([[6, 7], [3, 4]], device=device)
    starts = torch.tensor([0, 42], device=device)
    value = randn(2, 54, 2, 4, device=device, seed=6).to(low)
    loc = torch.rand(2, 5, 2, 2, 3, 2, generator=torch.Generator().manual_seed(7)).to(device)
    attn = torch.rand(2, 5, 2, 2, 3, generator=torch.Generator().manual_seed(8)).to(device)
    b = boxes(30, device).to(low)
    scores = torch.rand(30, generator=torch.Generator().manual_seed(9)).to(device)
    logits = randn(16, 5, device=device, seed=10).to(low)
    target = torch.randint(0, 5, (16,), generator=torch.Generator().manual_seed(11)).to(device)
    blur = torch.outer(*[torch.tensor([1.0, 3.0, 3.0, 1.0], device=device)] * 2) / 16.0
    return [
        ("roi_align", lambda x, r: ops.roi_align(x, r, [3, 3], 1.0, 2, "avg", True), (x, r), low),
        ("roi_align max", lambda x, r: ops.roi_align(x, r, [3, 3], 1.0, 2, "max", False), (x, r), low),
        ("roi_pool", lambda x, r: ops.roi_pool(x, r, [3, 3], 1.0), (x, r), low),
        ("bezier_align", lambda x, z: ops.bezier_align(x, z, [2, 4], 1.0, 2, True), (x, beziers(r)), low),
        (
            "multi_level_roi_align",
            lambda a, c, r: ops.multi_level_roi_align([a, c], r, [2, 2], [1.0, 0.5], 2, "avg", True, 56),
            (x, x[:, :, ::2, ::2].contiguous(), r),
            low,
        ),
        (
            "deform_conv2d",
            lambda x, o, w: ops.deform_conv2d(x, o, w, None, [1, 1], [1, 1], [1, 1], 1, 1),
            (x, offset, weight),
            low,
        ),
        (
            "modulated_deform_conv2d",
            lambda x, o, m, w: ops.modulated_deform_conv2d(x, o, m, w, None, [1, 1], [1, 1], [1, 1], 1, 1),
            (x, offset, mask, weight),
            low,
        ),
        ("ms_deform_attn", lambda v, l, a: ops.ms_deform_attn(v, shapes, starts, l, a), (value, loc, attn), low),
        ("bbox_overlaps", lambda a, c: ops.bbox_overlaps(a, c, "iou", False, 0), (b, b[:7].float()), low),
        ("nms", lambda a, s: ops.nms(a, s, 0.5), (b, scores), torch.int64),
        ("soft_nms dets", lambda a, s: ops.soft_nms(a, s, 0.3, 0.5, 1e-3, "gaussian")[0], (b, scores), low),
        ("nms_match", lambda d: ops.nms_match(d, 0.3), (torch.cat([b, scores[:, None].to(low)], 1),), torch.int64),
        ("sigmoid_focal_loss", lambda z: ops.sigmoid_focal_loss(z, target, 2.0, 0.25, None, "none"), (logits,), None),
        ("softmax_focal_loss", lambda z: ops.softmax_focal_loss(z, target, 2.0, 0.25, None, "sum"), (logits,), None),
        # --- upfirdn2d (a float32 kernel with low-precision input, as mmcv's filters) ---
        ("upfirdn2d", lambda x: ops.upfirdn2d(x, blur, [2, 2], [1, 1], [2, 1, 2, 1]), (x,), low),
        # --- fused_bias_leakyrelu (low-precision input with a float32 bias: mmcv's parameter) ---
        (
            "fused_bias_leakyrelu",
            lambda x, b: ops.fused_bias_leakyrelu(x, b, 0.2, 2**0.5),
            (x, x[0, :, 0, 0].float()),
            low,
        ),
        # --- bias_act (low-precision input with a float32 bias) ---
        ("bias_act", lambda x, b: ops.bias_act(x, b, 1, "lrelu", None, None, 256.0), (x, x[0, :, 0, 0].float()), low),
        # --- filtered_lrelu (float32 filters and bias with low-precision input) ---
        (
            "filtered_lrelu",
            lambda x, b: ops.filtered_lrelu(x, blur * 4, blur, b, 2, 2, [2, 2, 2, 2], 2**0.5, 0.2, 256.0),
            (x, x[0, :, 0, 0].float()),
            low,
        ),
    ]


def eager_float32(fn, tensors):
    floats = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in tensors]
    return fn(*floats)


@pytest.mark.parametrize("device,low", DEVICES)
def test_every_op_runs_in_float32_under_autocast(device, low):
    for name, fn, tensors, out_dtype in calls(device, low):
        expected = eager_float32(fn, tensors)
        with torch.autocast(device, dtype=low):
            got = fn(*tensors)
        want = torch.float32 if out_dtype is None else out_dtype
        assert got.dtype == want, name
        assert torch.equal(got, expected.to(want)), name


@pytest.mark.parametrize("device,low", DEVICES)
def test_mixed_dtypes_work_under_autocast_and_not_without(device, low):
    x = randn(2, 8, 12, 14, device=device).to(low)
    r = rois(6, 2, 12, device)  # float32 rois with low-precision features: mmdet under amp
    with pytest.raises(RuntimeError, match="rois"):
        ops.roi_align(x, r, [3, 3], 1.0, 2, "avg", True)
    with torch.autocast(device, dtype=low):
        out = ops.roi_align(x, r, [3, 3], 1.0, 2, "avg", True)
        out_fp32_data = ops.roi_align(x.float(), r.to(low), [3, 3], 1.0, 2, "avg", True)
    assert out.dtype == low
    assert out_fp32_data.dtype == torch.float32  # the data argument decides
    torch.testing.assert_close(out_fp32_data, ops.roi_align(x.float(), r.to(low).float(), [3, 3], 1.0, 2, "avg", True))


@pytest.mark.parametrize("device,low", DEVICES)
def test_float64_is_left_alone(device, low):
    x = randn(2, 8, 12, 14, device=device).double()
    r = rois(6, 2, 12, device).double()
    expected = ops.roi_align(x, r, [3, 3], 1.0, 2, "avg", True)
    with torch.autocast(device, dtype=low):
        got = ops.roi_align(x, r, [3, 3], 1.0, 2, "avg", True)
    assert got.dtype == torch.float64
    assert torch.equal(got, expected)


@pytest.mark.parametrize("device,low", DEVICES)
def test_gradients_flow_through_the_casts(device, low):
    for name, fn, tensors, out_dtype in calls(device, low):
        if out_dtype == torch.int64 or name == "soft_nms dets":
            continue
        leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in tensors]
        with torch.autocast(device, dtype=low):
            out = fn(*leaves)
        out.float().sum().backward()
        ref_leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in tensors]
        eager_float32(fn, ref_leaves).float().sum().backward()
        for a, b in zip(leaves, ref_leaves):
            if b.grad is None:  # no gradient (rois, boxes of nms)
                assert a.grad is None, name
                continue
            assert a.grad.dtype == a.dtype, name
            if device == "cpu":  # CPU backward passes are deterministic
                assert torch.equal(a.grad, b.grad.to(a.dtype)), name
            else:  # CUDA backward passes accumulate with atomics, in any order: the float32
                # sums differ in their last bits, so their roundings to `low` may differ by one
                # ulp, and a rounded one is then up to 1.5 ulp from the other's float32 value
                two_ulps = 2 * torch.finfo(low).eps
                torch.testing.assert_close(
                    a.grad.float(), b.grad.float(), rtol=two_ulps, atol=1e-4, msg=lambda m, name=name: f"{name}: {m}"
                )


@pytest.mark.parametrize("device,low", DEVICES)
def test_torchvision_autocast_agrees(device, low):
    tv = pytest.importorskip("torchvision")
    x = randn(2, 8, 12, 14, device=device).to(low)
    r = rois(6, 2, 12, device)
    with torch.autocast(device, dtype=low):
        ours = ops.roi_align(x, r, [3, 3], 0.5, 2, "avg", True)
        theirs = tv.ops.roi_align(x, r, [3, 3], 0.5, 2, True)
    assert ours.dtype == theirs.dtype
    torch.testing.assert_close(ours, theirs)
    if device == "cuda":  # torchvision's roi_pool has an autocast kernel for CUDA only
        with torch.autocast(device, dtype=low):
            ours_pool = ops.roi_pool(x, r, [3, 3], 0.5)
            theirs_pool = tv.ops.roi_pool(x, r, [3, 3], 0.5)
        assert ours_pool.dtype == theirs_pool.dtype
        torch.testing.assert_close(ours_pool, theirs_pool)


def test_every_public_op_has_an_autocast_kernel():
    from conformance import all_cases

    names = sorted({case.op._qualified_op_name for case in all_cases()})  # every op of the op table
    assert len(names) >= 12
    for name in names:
        for key in ("AutocastCPU", "AutocastCUDA"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(name, key), f"{name} has no {key} kernel"
