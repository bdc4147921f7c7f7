"""Tests of mmops::carafe: the conformance cases, then the float64 reference, known vectors,
gradcheck, the mmcv modules (CARAFEPack's layers and state_dict), special inputs and CUDA."""

import pytest
import torch
from carafe_reference import carafe_reference, random_masks
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL

import mmops

op = torch.ops.mmops.carafe

# (N, C, H, W), kernel_size, group_size, scale_factor
CONFIGS = [
    ((1, 1, 1, 1), 1, 1, 1),
    ((2, 4, 3, 3), 3, 1, 2),
    ((2, 6, 4, 5), 3, 3, 2),
    ((1, 8, 5, 7), 5, 2, 3),
    ((2, 64, 3, 3), 5, 4, 2),  # mmcv's test shape
    ((1, 3, 6, 4), 7, 1, 1),
    ((1, 2, 2, 3), 11, 2, 4),  # the window is larger than the map
]


def inputs(shape, k, g, s, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    n, c, h, w = shape
    features = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    return features, random_masks(n, k, g, h * s, w * s, generator=gen, dtype=dtype)


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    shape = (2, 8, 5, 6) if size == 0 else (3, 4, 7, 4)
    features, masks = inputs(shape, 3, 2, 2, dtype, seed=size)
    return Sample((features.to(device), masks.to(device), 3, 2, 2))


def _sample_k5(device, dtype, size):
    shape = (1, 6, 4, 9) if size == 0 else (2, 3, 6, 5)
    features, masks = inputs(shape, 5, 1, 1, dtype, seed=10 + size)
    return Sample((features.to(device), masks.to(device), 5, 1, 1))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    return [
        Sample((torch.randn(0, 4, 3, 3, **f), torch.rand(0, 18, 6, 6, **f), 3, 2, 2), out_shapes=[(0, 4, 6, 6)]),
        Sample((torch.randn(2, 0, 3, 3, **f), torch.rand(2, 18, 6, 6, **f), 3, 2, 2), out_shapes=[(2, 0, 6, 6)]),
        Sample((torch.randn(2, 4, 0, 3, **f), torch.rand(2, 18, 0, 6, **f), 3, 2, 2), out_shapes=[(2, 4, 0, 6)]),
    ]


def _cuda_samples(dtype):
    """Several pixel tiles and channel chunks, groups smaller and larger than a chunk, every
    kernel size up to 11, partial tiles."""
    shapes = [((2, 70, 9, 13), 5, 2, 2), ((1, 96, 7, 5), 3, 32, 3), ((2, 33, 6, 11), 11, 3, 1)]
    for i, (shape, k, g, s) in enumerate(shapes + CONFIGS):
        features, masks = inputs(shape, k, g, s, dtype, seed=100 + i)
        yield Sample((features, masks, k, g, s))


def _cuda_tol(dtype, what, expected, sample):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else TOL[dtype]


class _Net(torch.nn.Module):
    """carafe in a model: the CARAFE module, the functional wrappers and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.up = mmops.CARAFE(3, 2, 2)
        self.naive = mmops.CARAFENaive(3, 2, 2)

    def forward(self, features: torch.Tensor, masks: torch.Tensor):
        a = self.up(features * 1.5, masks)
        b = mmops.carafe_naive(features.sin(), masks * 0.5, 3, 2, 2)
        c = torch.ops.mmops.carafe(features, masks.softmax(dim=1), 3, 2, 2)
        return a + b, c.sum(dim=1) + self.naive(features, masks).mean(dim=1)


def _helpers(sample):
    features, masks, k, g, s = sample.args
    out = op(*sample.args)
    return [(torch.ops.mmops._carafe_backward, (torch.randn_like(out), features, masks, k, g, s))]


def _message(text):
    return f"mmops::carafe: .*{text}"


def _bad(make, text):
    return BadInput(make, _message(text), meta=True)


CONFORMANCE = [
    ConformanceCase(
        "carafe",
        op,
        _sample,
        grad_args=(0, 1),
        feature_args=(0, 1),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cuda_tol=_cuda_tol,
        nonzero_grads=True,
        bad_inputs={
            "features_3d": _bad(lambda f, m, *o: (f[0], m, 3, 2, 2), "features to be a 4-D"),
            "masks_3d": _bad(lambda f, m, *o: (f, m[0], 3, 2, 2), "masks to be a 4-D"),
            "int_features": _bad(lambda f, m, *o: (f.int(), m.int(), 3, 2, 2), "floating point"),
            "masks_dtype": _bad(lambda f, m, *o: (f, m.double(), 3, 2, 2), "masks to have the dtype"),
            "kernel_even": _bad(lambda f, m, *o: (f, m, 2, 2, 2), "kernel_size must be odd"),
            "kernel_zero": _bad(lambda f, m, *o: (f, m, 0, 2, 2), "kernel_size"),
            "kernel_13": _bad(lambda f, m, *o: (f, m, 13, 2, 2), r"kernel_size must be odd and in \[1, 11\]"),
            "group_zero": _bad(lambda f, m, *o: (f, m, 3, 0, 2), "group_size must be positive"),
            "group_not_dividing": _bad(lambda f, m, *o: (f, m, 3, 3, 2), "divisible by group_size"),
            "scale_zero": _bad(lambda f, m, *o: (f, m, 3, 2, 0), "scale_factor must be in"),
            "scale_huge": _bad(lambda f, m, *o: (f, m, 3, 2, 2**40), "scale_factor must be in"),
            "mask_channels": _bad(lambda f, m, *o: (f, m[:, :9], 3, 2, 2), "expected masks of shape"),
            "mask_height": _bad(lambda f, m, *o: (f, m[:, :, :-1], 3, 2, 2), "expected masks of shape"),
            "mask_width": _bad(lambda f, m, *o: (f, m[..., :-2], 3, 2, 2), "expected masks of shape"),
            "mask_batch": _bad(lambda f, m, *o: (f, m[:1], 3, 2, 2), "expected masks of shape"),
            "mask_scale": _bad(lambda f, m, *o: (f, m, 3, 2, 1), "expected masks of shape"),
            "group_huge": _bad(lambda f, m, *o: (f, m, 3, 2**62, 2), "does not fit in int64|divisible"),
        },
    ),
    ConformanceCase(
        "carafe_k5",
        op,
        _sample_k5,
        grad_args=(0, 1),
        feature_args=(0, 1),
        dtypes=(),
        module_tests=(),
    ),
]


class TestCarafeConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def grads_of(fn, features, masks, k, g, s, cot):
    f = features.detach().requires_grad_(True)
    m = masks.detach().requires_grad_(True)
    out = fn(f, m, k, g, s)
    gf, gm = torch.autograd.grad(out, (f, m), cot)
    return out, gf, gm


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_matches_reference(config, dtype):
    shape, k, g, s = config
    features, masks = inputs(shape, k, g, s, dtype, seed=1)
    n, c, h, w = shape
    cot = torch.randn(n, c, h * s, w * s, dtype=torch.float64)
    out, gf, gm = grads_of(op, features, masks, k, g, s, cot.to(dtype))
    ref, rgf, rgm = grads_of(carafe_reference, features.double(), masks.double(), k, g, s, cot)
    tol = TOL[dtype]
    torch.testing.assert_close(out.double(), ref, **tol)
    torch.testing.assert_close(gf.double(), rgf, **tol)
    torch.testing.assert_close(gm.double(), rgm, **tol)
    assert out.dtype == gf.dtype == gm.dtype == dtype


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_cpu_matches_reference(dtype):
    features, masks = inputs((2, 6, 5, 4), 5, 3, 2, dtype, seed=2)
    ref = carafe_reference(features.double(), masks.double(), 5, 3, 2)
    torch.testing.assert_close(op(features, masks, 5, 3, 2).double(), ref, **TOL[dtype])


def test_known_vector_tap_order():
    """Tap (ky, kx) = (0, 0) reads the pixel up and left of the source pixel; the centre tap reads it."""
    features = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64).view(1, 1, 2, 2)
    corner = torch.zeros(1, 9, 2, 2, dtype=torch.float64)
    corner[:, 0] = 1
    assert torch.equal(op(features, corner, 3, 1, 1), torch.tensor([[[[0.0, 0.0], [0.0, 1.0]]]], dtype=torch.float64))
    right = torch.zeros(1, 9, 2, 2, dtype=torch.float64)
    right[:, 5] = 1  # (ky, kx) = (1, 2): the pixel to the right
    assert torch.equal(op(features, right, 3, 1, 1), torch.tensor([[[[2.0, 0.0], [4.0, 0.0]]]], dtype=torch.float64))
    ones = torch.ones(1, 9, 2, 2, dtype=torch.float64)
    assert torch.equal(op(features, ones, 3, 1, 1), torch.full((1, 1, 2, 2), 10.0, dtype=torch.float64))


def test_known_vector_upsampling_and_groups():
    """With the centre tap only, carafe is nearest upsampling; channel c uses group c // (C // G)."""
    features = torch.arange(24, dtype=torch.float64).view(1, 4, 2, 3)
    masks = torch.zeros(1, 2 * 9, 4, 6, dtype=torch.float64)
    masks[:, 4] = 1.0  # group 0: centre tap, weight 1
    masks[:, 9 + 4] = 2.0  # group 1: centre tap, weight 2
    out = op(features, masks, 3, 2, 2)
    nearest = features.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
    expected = nearest * torch.tensor([1.0, 1.0, 2.0, 2.0], dtype=torch.float64).view(1, 4, 1, 1)
    assert torch.equal(out, expected)


def test_reference_matches_loops():
    """The unfold reference against mmcv's index rules written as loops (tiny shape)."""
    shape, k, g, s = (1, 4, 3, 2), 3, 2, 2
    features, masks = inputs(shape, k, g, s, seed=3)
    n, c, h, w = shape
    out = torch.zeros(n, c, h * s, w * s, dtype=torch.float64)
    r = (k - 1) // 2
    for ch in range(c):
        grp = ch // (c // g)
        for ho in range(h * s):
            for wo in range(w * s):
                for ky in range(k):
                    for kx in range(k):
                        y, x = ho // s - r + ky, wo // s - r + kx
                        if 0 <= y < h and 0 <= x < w:
                            out[0, ch, ho, wo] += features[0, ch, y, x] * masks[0, grp * k * k + ky * k + kx, ho, wo]
    torch.testing.assert_close(carafe_reference(features, masks, k, g, s), out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(op(features, masks, k, g, s), out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("config", [CONFIGS[2], CONFIGS[3], ((1, 4, 3, 3), 5, 4, 2)], ids=str)
def test_gradcheck(config):
    shape, k, g, s = config
    features, masks = inputs(shape, k, g, s, seed=4)
    features.requires_grad_(True)
    masks.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda f, m: op(f, m, k, g, s), (features, masks), fast_mode=True)


def test_mmcv_gradcheck_shape():
    """mmcv's test_carafe_gradcheck: CARAFE(5, 4, 2) on [2, 64, 3, 3] with sigmoid masks."""
    torch.manual_seed(0)
    feat = torch.randn(2, 64, 3, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.randn(2, 100, 6, 6, dtype=torch.float64).sigmoid().requires_grad_(True)
    assert torch.autograd.gradcheck(mmops.CARAFE(5, 4, 2), (feat, mask), atol=1e-4, eps=1e-4, fast_mode=True)
    assert torch.autograd.gradcheck(mmops.CARAFENaive(5, 4, 2), (feat, mask), atol=1e-4, eps=1e-4, fast_mode=True)


def test_double_backward_raises():
    features, masks = inputs((1, 2, 3, 3), 3, 1, 2, seed=5)
    features.requires_grad_(True)
    out = op(features, masks, 3, 1, 2)
    go = torch.randn_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        (g,) = torch.autograd.grad(out, features, go, create_graph=True)
        torch.autograd.grad(g.sum(), (features, go))


def test_backward_is_deterministic():
    features, masks = inputs((2, 8, 6, 7), 5, 2, 2, torch.float32, seed=6)
    cot = torch.randn(2, 8, 12, 14)
    first = grads_of(op, features, masks, 5, 2, 2, cot)
    for _ in range(3):
        for a, b in zip(grads_of(op, features, masks, 5, 2, 2, cot), first):
            assert torch.equal(a, b)


@pytest.mark.parametrize("layout", ["channels_last", "sliced"])
def test_noncontiguous_inputs(layout):
    features, masks = inputs((2, 4, 5, 6), 3, 2, 2, seed=7)
    expected = op(features, masks, 3, 2, 2)
    if layout == "channels_last":
        f, m = (
            features.contiguous(memory_format=torch.channels_last),
            masks.contiguous(memory_format=torch.channels_last),
        )
    else:
        f = torch.stack([features, features], dim=-1)[..., 0]
        m = torch.stack([masks, masks], dim=-1)[..., 1]
        assert not f.is_contiguous() and not m.is_contiguous()
    torch.testing.assert_close(op(f, m, 3, 2, 2), expected, rtol=0, atol=0)


def test_nan_propagates_only_to_readers():
    """A NaN feature reaches the outputs whose window holds it, and no others."""
    features, masks = inputs((1, 1, 5, 5), 3, 1, 1, seed=8)
    features[0, 0, 0, 0] = float("nan")
    out = op(features, masks, 3, 1, 1)
    expected = torch.zeros(5, 5, dtype=torch.bool)
    expected[:2, :2] = True
    assert torch.equal(out[0, 0].isnan(), expected)


def test_backward_helper_checks():
    features, masks = inputs((1, 2, 3, 3), 3, 1, 2, seed=9)
    bwd = torch.ops.mmops._carafe_backward
    with pytest.raises(RuntimeError, match="mmops::carafe: expected grad_output of shape"):
        bwd(torch.zeros(1, 2, 6, 5, dtype=torch.float64), features, masks, 3, 1, 2)
    with pytest.raises(RuntimeError, match="mmops::carafe: expected grad_output to have the dtype"):
        bwd(torch.zeros(1, 2, 6, 6), features, masks, 3, 1, 2)
    with pytest.raises(RuntimeError, match="mmops::carafe: kernel_size"):
        bwd(torch.zeros(1, 2, 6, 6, dtype=torch.float64), features, masks, 4, 1, 2)


@pytest.mark.parametrize(
    "device,low",
    [
        pytest.param("cpu", torch.bfloat16, id="cpu-bf16"),
        pytest.param("cuda", torch.float16, id="cuda-fp16", marks=pytest.mark.cuda),
        pytest.param("cuda", torch.bfloat16, id="cuda-bf16", marks=pytest.mark.cuda),
    ],
)
def test_autocast_runs_in_float32(device, low):
    """Under autocast low-precision features with float32 masks (mixed, as CARAFEPack under amp)
    run in float32 and come back in the features' dtype; gradients flow through the casts."""
    features, masks = inputs((2, 4, 5, 6), 3, 2, 2, torch.float32, seed=15)
    f = features.to(device=device, dtype=low).requires_grad_(True)
    m = masks.to(device).requires_grad_(True)
    with pytest.raises(RuntimeError, match="masks to have the dtype"):
        op(f, m, 3, 2, 2)
    with torch.autocast(device, dtype=low):
        out = op(f, m, 3, 2, 2)
    assert out.dtype == low
    f32, m32 = f.detach().float().requires_grad_(True), m.detach().clone().requires_grad_(True)
    expected = op(f32, m32, 3, 2, 2)
    assert torch.equal(out, expected.to(low))
    out.float().sum().backward()
    expected.sum().backward()
    assert f.grad.dtype == low and m.grad.dtype == torch.float32
    assert torch.equal(f.grad, f32.grad.to(low)) and torch.equal(m.grad, m32.grad)


# --------------------------------------------------------------------------- modules


def test_functional_and_modules():
    features, masks = inputs((1, 4, 3, 4), 3, 2, 2, seed=11)
    expected = carafe_reference(features, masks, 3, 2, 2)
    for out in (
        mmops.carafe(features, masks, 3, 2, 2),
        mmops.carafe_naive(features, masks, 3, 2, 2),
        mmops.CARAFE(3, 2, 2)(features, masks),
        mmops.CARAFENaive(3, 2, 2)(features, masks),
    ):
        torch.testing.assert_close(out, expected, **TOL[torch.float64])
    with pytest.raises(TypeError):
        mmops.CARAFE(3.0, 2, 2)


def test_carafe_pack_layers_and_state_dict():
    """mmcv's CARAFEPack layers, attribute names and state_dict keys (checkpoints load)."""
    pack = mmops.CARAFEPack(256, 2)
    assert pack.up_kernel == 5 and pack.up_group == 1 and pack.encoder_kernel == 3
    assert pack.encoder_dilation == 1 and pack.compressed_channels == 64
    shapes = {k: tuple(v.shape) for k, v in pack.state_dict().items()}
    assert shapes == {
        "channel_compressor.weight": (64, 256, 1, 1),
        "channel_compressor.bias": (64,),
        "content_encoder.weight": (100, 64, 3, 3),
        "content_encoder.bias": (100,),
    }
    assert pack.content_encoder.padding == (1, 1) and pack.content_encoder.dilation == (1, 1)
    dilated = mmops.CARAFEPack(
        16, 3, up_kernel=3, up_group=2, encoder_kernel=5, encoder_dilation=2, compressed_channels=8
    )
    assert tuple(dilated.content_encoder.weight.shape) == (3 * 3 * 2 * 9, 8, 5, 5)
    assert dilated.content_encoder.padding == (4, 4) and dilated.content_encoder.dilation == (2, 2)
    pack.load_state_dict({k: torch.randn(v) for k, v in shapes.items()})


def test_carafe_pack_init():
    """xavier_uniform (gain 1) on the compressor, normal(std 0.001) on the encoder, zero biases."""
    torch.manual_seed(0)
    pack = mmops.CARAFEPack(128, 2)
    bound = (6.0 / (128 + 64)) ** 0.5
    w = pack.channel_compressor.weight
    assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound
    assert 0.0005 < pack.content_encoder.weight.std() < 0.0015
    assert torch.equal(pack.channel_compressor.bias, torch.zeros(64))
    assert torch.equal(pack.content_encoder.bias, torch.zeros(100))


def _pack_reference(pack, x):
    """CARAFEPack's forward written independently: encoder, pixel shuffle, softmax per tap group."""
    s, k, g = pack.scale_factor, pack.up_kernel, pack.up_group
    logits = pack.content_encoder(pack.channel_compressor(x))
    n, _, h, w = logits.shape
    mask = torch.nn.functional.pixel_shuffle(logits, s).view(n, g, k * k, h * s, w * s).softmax(dim=2)
    return carafe_reference(x, mask.reshape(n, -1, h * s, w * s), k, g, s)


@pytest.mark.parametrize("kwargs", [dict(), dict(up_kernel=3, up_group=2, encoder_dilation=2)], ids=str)
def test_carafe_pack_forward(kwargs):
    torch.manual_seed(1)
    pack = mmops.CARAFEPack(8, 2, compressed_channels=6, **kwargs).double()
    torch.nn.init.normal_(pack.content_encoder.weight, std=0.3)  # masks far from uniform
    x = torch.randn(2, 8, 5, 7, dtype=torch.float64, requires_grad=True)
    out = pack(x)
    assert out.shape == (2, 8, 10, 14)
    torch.testing.assert_close(out, _pack_reference(pack, x), **TOL[torch.float64])
    (gx,) = torch.autograd.grad(out.sum(), x)
    (rx,) = torch.autograd.grad(_pack_reference(pack, x).sum(), x)
    torch.testing.assert_close(gx, rx, **TOL[torch.float64])


def test_carafe_pack_scripts():
    pack = mmops.CARAFEPack(8, 2, compressed_channels=4)
    x = torch.randn(1, 8, 4, 5)
    scripted = torch.jit.script(pack)
    torch.testing.assert_close(scripted(x), pack(x), rtol=0, atol=0)


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_cuda_fpn_shape_matches_reference(dtype):
    """The CARAFE FPN shape (C 256, k 5, group 1, scale 2), forward and both gradients."""
    features, masks = inputs((2, 256, 25, 38), 5, 1, 2, dtype, seed=12)
    cot = torch.randn(2, 256, 50, 76, dtype=torch.float64)
    out, gf, gm = grads_of(op, features.cuda(), masks.cuda(), 5, 1, 2, cot.to(dtype).cuda())
    ref, rgf, rgm = grads_of(carafe_reference, features.double(), masks.double(), 5, 1, 2, cot.to(dtype).double())
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else TOL[dtype]
    if dtype in (torch.float16, torch.bfloat16):  # the sums over 256 channels round once
        tol = dict(rtol=tol["rtol"], atol=tol["atol"] * 8)
    torch.testing.assert_close(out.cpu().double(), ref, **tol)
    torch.testing.assert_close(gf.cpu().double(), rgf, **tol)
    torch.testing.assert_close(gm.cpu().double(), rgm, **tol)


@pytest.mark.cuda
def test_cuda_backward_is_deterministic():
    features, masks = inputs((2, 64, 13, 17), 5, 4, 2, torch.float32, seed=13)
    cot = torch.randn(2, 64, 26, 34).cuda()
    first = grads_of(op, features.cuda(), masks.cuda(), 5, 4, 2, cot)
    for _ in range(3):
        for a, b in zip(grads_of(op, features.cuda(), masks.cuda(), 5, 4, 2, cot), first):
            assert torch.equal(a, b)


@pytest.mark.cuda
def test_cuda_device_mismatch_raises():
    features, masks = inputs((1, 2, 3, 3), 3, 1, 2, torch.float32)
    with pytest.raises(RuntimeError, match="mmops::carafe: expected masks on the device of features"):
        op(features.cuda(), masks, 3, 1, 2)


@pytest.mark.cuda
def test_cuda_gradcheck():
    features, masks = inputs((2, 8, 3, 4), 5, 2, 2, seed=14)
    f = features.cuda().requires_grad_(True)
    m = masks.cuda().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: op(a, b, 5, 2, 2), (f, m))
