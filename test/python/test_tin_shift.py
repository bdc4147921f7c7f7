"""Tests of mmops::tin_shift: the conformance cases, then the float64 loop reference
(tin_shift_reference.py), mmcv's known vectors (and the gradient rule where mmops differs),
gradcheck, shifts of any size, NaN / -0.0, strides, an emulation of the CUDA kernel's word
indexing, CUDA == CPU and the mmcv bridge."""

import importlib
import math

import pytest
import torch
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from tin_shift_reference import tin_shift_composite, tin_shift_grad_ref, tin_shift_ref

import mmops

op = torch.ops.mmops.tin_shift
bwd_op = torch.ops.mmops._tin_shift_backward
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
EXACT = dict(rtol=0, atol=0)  # a copy: every result is one of the inputs' values or 0


# --------------------------------------------------------------------------- inputs


def make_inputs(shape, groups, max_shift=None, seed=0, dtype=torch.float32, shift_dtype=torch.int32):
    """input of `shape` [N, T, C, ...] and shift [N, groups] in [-max_shift, max_shift]
    (default: T + 1, so that some groups move out entirely)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    bound = shape[1] + 1 if max_shift is None else max_shift
    shift = torch.randint(-bound, bound + 1, (shape[0], groups), generator=g).to(shift_dtype)
    return x, shift


# --------------------------------------------------------------------------- conformance


def _sample(device, dtype, size):
    # every size distinct (torch.compile's duck sizing would tie equal sizes together)
    shape, groups = ((2, 5, 12, 3, 7), 4) if size == 0 else ((3, 6, 10, 4, 9), 5)
    x, shift = make_inputs(shape, groups, seed=20 + size, dtype=dtype)
    return Sample((x.to(device), shift.to(device)))


def _empty(device, dtype):
    f = dict(dtype=dtype, device=device)
    s = dict(dtype=torch.int32, device=device)
    return [
        Sample((torch.randn(0, 5, 6, 3, 4, **f), torch.zeros(0, 3, **s)), out_shapes=[(0, 5, 6, 3, 4)]),
        Sample((torch.randn(2, 0, 6, 12, **f), torch.ones(2, 3, **s)), out_shapes=[(2, 0, 6, 12)]),
        Sample((torch.randn(2, 5, 0, 3, 4, **f), torch.ones(2, 3, **s)), out_shapes=[(2, 5, 0, 3, 4)]),
        Sample((torch.randn(2, 5, 6, 0, 4, **f), torch.ones(2, 2, **s)), out_shapes=[(2, 5, 6, 0, 4)]),
    ]


# CUDA paths: 16-byte words when C / G * H * W is a multiple of the word (4 float, 8 half /
# bfloat16, 2 double), else one value per word; int32 and int64 shifts; 4-D and 5-D.
CUDA_SHAPES = [  # (shape, groups, shift dtype)
    ((2, 5, 12, 3, 7), 4, torch.int32),  # 3 * 21 values per run: one value per word
    ((2, 8, 16, 7, 7), 2, torch.int32),  # 8 * 49: wide for every dtype
    ((3, 8, 64, 8, 8), 8, torch.int64),  # wide
    ((2, 4, 6, 10), 3, torch.int64),  # 4-D, 2 * 10: wide for float64 only
    ((1, 3, 4, 1, 1), 4, torch.int32),  # one value per run
    ((2, 6, 40, 14, 14), 5, torch.int32),  # 8 * 196: wide
]


def _cuda_samples(dtype):
    for i, (shape, groups, shift_dtype) in enumerate(CUDA_SHAPES):
        x, shift = make_inputs(shape, groups, seed=40 + i, dtype=dtype, shift_dtype=shift_dtype)
        yield Sample((x, shift))


def _cuda_tol(dtype, what, expected, sample):
    return EXACT


class _Net(torch.nn.Module):
    """tin_shift in a model: TINShift, the functional wrapper and the op on computed inputs."""

    def __init__(self):
        super().__init__()
        self.shift = mmops.TINShift()

    def forward(self, x: torch.Tensor, shift: torch.Tensor):
        a = self.shift(x * 2.0, shift)
        b = mmops.tin_shift(x.sin(), -shift)
        return a + b, torch.ops.mmops.tin_shift(x, shift + 1).sum(dim=1)


def _helpers(sample):
    x, shift = sample.args
    return [(bwd_op, (torch.randn_like(x), shift))]


def _message(text):
    return f"mmops::tin_shift: .*{text}"


CONFORMANCE = [
    ConformanceCase(
        "tin_shift",
        op,
        _sample,
        grad_args=(0,),
        empty=_empty,
        module=_Net,
        helpers=_helpers,
        cuda_samples=_cuda_samples,
        cuda_tol=_cuda_tol,
        nonzero_grads=True,
        bad_inputs={
            "input_3d": BadInput(lambda x, s: (x[0, 0], s), _message("input to be a 4-D"), meta=True),
            "input_6d": BadInput(lambda x, s: (x[..., None], s), _message("or a 5-D tensor"), meta=True),
            "int_input": BadInput(lambda x, s: (x.int(), s), _message("input to have a floating"), meta=True),
            "float_shift": BadInput(lambda x, s: (x, s.float()), _message("shift to be an int32 or int64"), meta=True),
            "shift_1d": BadInput(lambda x, s: (x, s[0]), _message("shift to be a 2-D"), meta=True),
            "shift_rows": BadInput(lambda x, s: (x, s[:1]), _message("one row per clip, N = 2"), meta=True),
            "no_groups": BadInput(lambda x, s: (x, s[:, :0]), _message("G >= 1"), meta=True),
            "groups_not_dividing": BadInput(
                lambda x, s: (x, torch.zeros(2, 5, dtype=torch.int32)), _message("C = 12 .* G = 5"), meta=True
            ),
        },
    ),
]


class TestTinShiftConformance(ConformanceSuite):
    cases = CONFORMANCE


# --------------------------------------------------------------------------- forward / backward


def grad_of(x, shift, go):
    x = x.detach().requires_grad_(True)
    out = op(x, shift)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g


# (shape, groups, max shift)
SHAPES = [
    ((2, 5, 12, 3, 7), 4, None),
    ((1, 8, 8, 2), 8, 3),  # 4-D, one channel per group
    ((3, 4, 6, 2, 2), 1, None),  # one group
    ((2, 3, 4, 1, 5), 2, 10),  # shifts past T
    ((1, 1, 2, 3), 2, 1),  # one frame
]


@pytest.mark.parametrize("shift_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(dtype, shift_dtype):
    for i, (shape, groups, bound) in enumerate(SHAPES):
        x, shift = make_inputs(shape, groups, bound, seed=i, dtype=dtype, shift_dtype=shift_dtype)
        go = torch.randn(shape, generator=torch.Generator().manual_seed(100 + i)).to(dtype)
        out, grad = grad_of(x, shift, go)
        assert out.dtype == dtype and out.shape == x.shape and out.is_contiguous() and grad.dtype == dtype
        torch.testing.assert_close(out.double(), tin_shift_ref(x, shift), **EXACT)
        torch.testing.assert_close(grad.double(), tin_shift_grad_ref(go, shift), **EXACT)
        torch.testing.assert_close(bwd_op(go, shift).double(), tin_shift_grad_ref(go, shift), **EXACT)


def test_matches_gather_composite():
    x, shift = make_inputs((4, 8, 64, 7, 7), 8, seed=5, dtype=torch.float64)
    torch.testing.assert_close(op(x, shift), tin_shift_composite(x, shift), **EXACT)
    torch.testing.assert_close(tin_shift_composite(x, shift), tin_shift_ref(x, shift), **EXACT)


def test_positive_shift_moves_towards_later_frames():
    x = torch.arange(1.0, 5.0).view(1, 4, 1, 1)  # frame t holds t + 1
    assert op(x, torch.tensor([[1]])).flatten().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert op(x, torch.tensor([[-1]])).flatten().tolist() == [2.0, 3.0, 4.0, 0.0]
    assert op(x, torch.tensor([[0]])).flatten().tolist() == [1.0, 2.0, 3.0, 4.0]
    # groups: channels [0, 2) follow shift[:, 0], [2, 4) shift[:, 1]
    y = torch.arange(1.0, 4.0).view(1, 3, 1, 1).expand(1, 3, 4, 2).contiguous()
    out = op(y, torch.tensor([[1, -2]]))
    assert out[0, :, :2, 0].tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    assert out[0, :, 2:, 0].tolist() == [[3.0, 3.0], [0.0, 0.0], [0.0, 0.0]]


# mmcv's tests/test_ops/test_tin_shift.py: input [2, 4, 8, 2] (N, T, C, H * W), two shifts [2, 4]
# and the outputs (5 significant digits) and input gradients of output.backward(ones).
MMCV_INPUT = [
    [
        [
            [0.88572276, 0.46422583],
            [0.97408265, 0.59547687],
            [0.030812204, 0.96236038],
            [0.75418317, 0.44058233],
            [0.33279222, 0.00084149837],
            [0.7069388, 0.23255438],
            [0.13547045, 0.81549376],
            [0.40174931, 0.36317211],
        ],
        [
            [0.57444429, 0.15905505],
            [0.39897251, 0.25790238],
            [0.93282568, 0.18451685],
            [0.92526674, 0.18283755],
            [0.31664443, 0.59323865],
            [0.1957739, 0.42505842],
            [0.081158757, 0.81340349],
            [0.43456328, 0.30195212],
        ],
        [
            [0.8198145, 0.05990988],
            [0.98062474, 0.34803438],
            [0.10412294, 0.37183142],
            [0.15021622, 0.038857818],
            [0.40985721, 0.42253625],
            [0.71150124, 0.59778064],
            [0.83851069, 0.15194464],
            [0.097513378, 0.74820143],
        ],
        [
            [0.80680406, 0.49327564],
            [0.17821097, 0.12980539],
            [0.50657678, 0.14446253],
            [0.04178369, 0.53071898],
            [0.84983683, 0.3826949],
            [0.32193625, 0.91275406],
            [0.75628334, 0.52934098],
            [0.27994192, 0.3053292],
        ],
    ],
    [
        [
            [0.082397044, 0.4210068],
            [0.23563534, 0.7938987],
            [0.63669145, 0.69397897],
            [0.8844561, 0.97854084],
            [0.79027033, 0.60640401],
            [0.63528901, 0.72172403],
            [0.0097346902, 0.70800996],
            [0.87891227, 0.13674974],
        ],
        [
            [0.74329448, 0.0243572],
            [0.82178867, 0.85750699],
            [0.7568835, 0.73146772],
            [0.5031184, 0.30479157],
            [0.28713053, 0.47414285],
            [0.4682079, 0.067471564],
            [0.48368263, 0.14590704],
            [0.25397325, 0.19946373],
        ],
        [
            [0.4291026, 0.068739474],
            [0.7159555, 0.79903615],
            [0.76412082, 0.85348046],
            [0.081224024, 0.82264912],
            [0.97173303, 0.24291694],
            [0.48957139, 0.43488795],
            [0.67382395, 0.21889746],
            [0.36712623, 0.67127824],
        ],
        [
            [0.12054044, 0.18096751],
            [0.86675781, 0.54755616],
            [0.68208277, 0.15164375],
            [0.79991871, 0.80811197],
            [0.85256428, 0.68253738],
            [0.185983, 0.95642138],
            [0.48102546, 0.28009653],
            [0.35726011, 0.58168036],
        ],
    ],
]
MMCV_SHIFTS = [[[1, 0, 1, -2], [-2, 1, -1, 1]], [[2, 1, 2, -1], [-1, 2, 0, 2]]]
MMCV_OUTPUTS = [
    [
        [
            [
                [0.0, 0.0],
                [0.0, 0.0],
                [0.030812, 0.96236],
                [0.75418, 0.44058],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.83851, 0.15194],
                [0.097513, 0.7482],
            ],
            [
                [0.88572, 0.46423],
                [0.97408, 0.59548],
                [0.93283, 0.18452],
                [0.92527, 0.18284],
                [0.33279, 0.0008415],
                [0.70694, 0.23255],
                [0.75628, 0.52934],
                [0.27994, 0.30533],
            ],
            [
                [0.57444, 0.15906],
                [0.39897, 0.2579],
                [0.10412, 0.37183],
                [0.15022, 0.038858],
                [0.31664, 0.59324],
                [0.19577, 0.42506],
                [0.0, 0.0],
                [0.0, 0.0],
            ],
            [
                [0.81981, 0.05991],
                [0.98062, 0.34803],
                [0.50658, 0.14446],
                [0.041784, 0.53072],
                [0.40986, 0.42254],
                [0.7115, 0.59778],
                [0.0, 0.0],
                [0.0, 0.0],
            ],
        ],
        [
            [
                [0.4291, 0.068739],
                [0.71596, 0.79904],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.28713, 0.47414],
                [0.46821, 0.067472],
                [0.0, 0.0],
                [0.0, 0.0],
            ],
            [
                [0.12054, 0.18097],
                [0.86676, 0.54756],
                [0.63669, 0.69398],
                [0.88446, 0.97854],
                [0.97173, 0.24292],
                [0.48957, 0.43489],
                [0.0097347, 0.70801],
                [0.87891, 0.13675],
            ],
            [
                [0.0, 0.0],
                [0.0, 0.0],
                [0.75688, 0.73147],
                [0.50312, 0.30479],
                [0.85256, 0.68254],
                [0.18598, 0.95642],
                [0.48368, 0.14591],
                [0.25397, 0.19946],
            ],
            [
                [0.0, 0.0],
                [0.0, 0.0],
                [0.76412, 0.85348],
                [0.081224, 0.82265],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.67382, 0.2189],
                [0.36713, 0.67128],
            ],
        ],
    ],
    [
        [
            [
                [0.0, 0.0],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.081159, 0.8134],
                [0.43456, 0.30195],
            ],
            [
                [0.0, 0.0],
                [0.0, 0.0],
                [0.030812, 0.96236],
                [0.75418, 0.44058],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.83851, 0.15194],
                [0.097513, 0.7482],
            ],
            [
                [0.88572, 0.46423],
                [0.97408, 0.59548],
                [0.93283, 0.18452],
                [0.92527, 0.18284],
                [0.33279, 0.0008415],
                [0.70694, 0.23255],
                [0.75628, 0.52934],
                [0.27994, 0.30533],
            ],
            [
                [0.57444, 0.15906],
                [0.39897, 0.2579],
                [0.10412, 0.37183],
                [0.15022, 0.038858],
                [0.31664, 0.59324],
                [0.19577, 0.42506],
                [0.0, 0.0],
                [0.0, 0.0],
            ],
        ],
        [
            [
                [0.74329, 0.024357],
                [0.82179, 0.85751],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.79027, 0.6064],
                [0.63529, 0.72172],
                [0.0, 0.0],
                [0.0, 0.0],
            ],
            [
                [0.4291, 0.068739],
                [0.71596, 0.79904],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.28713, 0.47414],
                [0.46821, 0.067472],
                [0.0, 0.0],
                [0.0, 0.0],
            ],
            [
                [0.12054, 0.18097],
                [0.86676, 0.54756],
                [0.63669, 0.69398],
                [0.88446, 0.97854],
                [0.97173, 0.24292],
                [0.48957, 0.43489],
                [0.0097347, 0.70801],
                [0.87891, 0.13675],
            ],
            [
                [0.0, 0.0],
                [0.0, 0.0],
                [0.75688, 0.73147],
                [0.50312, 0.30479],
                [0.85256, 0.68254],
                [0.18598, 0.95642],
                [0.48368, 0.14591],
                [0.25397, 0.19946],
            ],
        ],
    ],
]
# mmcv's published gradients, as 0/1 masks [N, T, C] (the same for both positions)
MMCV_GRAD_MASKS = [
    [
        [[0, 1, 0, 1], [1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 0]],
        [[1, 0, 1, 0], [1, 1, 1, 1], [0, 1, 1, 1], [0, 1, 0, 1]],
    ],
    [
        [[0, 0, 0, 1], [0, 1, 0, 1], [1, 1, 1, 1], [1, 1, 1, 0]],
        [[1, 0, 1, 0], [1, 0, 1, 0], [1, 1, 1, 1], [0, 1, 1, 1]],
    ],
]


def mmcv_grad(k, dtype=torch.float64):
    """mmcv's published gradient k, [2, 4, 8, 2] (each mask entry covers a group of 2 channels)."""
    mask = torch.tensor(MMCV_GRAD_MASKS[k], dtype=dtype)  # [N, T, G]
    return mask.repeat_interleave(2, dim=2)[..., None].expand(2, 4, 8, 2)


# mmcv's 5-digit values against the input's rounding to the dtype
VECTOR_ATOL = {torch.float16: 5e-4, torch.bfloat16: 4e-3}


def _check_mmcv_vectors(fn, device, dtype):
    for k, shift in enumerate(MMCV_SHIFTS):
        x = torch.tensor(MMCV_INPUT, dtype=dtype, device=device, requires_grad=True)
        s = torch.tensor(shift, dtype=torch.int32, device=device)
        out = fn(x, s)
        out.backward(torch.ones_like(out))
        expected = torch.tensor(MMCV_OUTPUTS[k], dtype=torch.float64)
        # mmcv rounds its expected values to 5 digits; every output is an input value or 0
        torch.testing.assert_close(out.detach().double().cpu(), expected, rtol=0, atol=VECTOR_ATOL.get(dtype, 1e-5))
        torch.testing.assert_close(out.detach().cpu(), tin_shift_ref(x.detach().cpu(), s.cpu()).to(dtype), **EXACT)
        # the gradient of sum(output): 1 where the input frame lands inside [0, T), i.e. ones
        # moved by -shift; mmcv's published gradients are ones moved by +shift (its backward
        # kernel repeats the forward's move; docs/ops/tin_shift.md)
        ones = torch.ones(2, 4, 8, 2, dtype=dtype)
        torch.testing.assert_close(x.grad.cpu(), tin_shift_grad_ref(ones, s.cpu()).to(dtype), **EXACT)
        torch.testing.assert_close(tin_shift_ref(ones, s.cpu()), mmcv_grad(k), **EXACT)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mmcv_known_vectors(dtype):
    _check_mmcv_vectors(mmops.tin_shift, "cpu", dtype)
    _check_mmcv_vectors(lambda x, s: mmops.TINShift()(x, s), "cpu", dtype)


def test_gradcheck():
    x, shift = make_inputs((2, 5, 6, 2, 3), 3, seed=3, dtype=torch.float64)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: op(t, shift), (x,))
    y, shift4 = make_inputs((1, 4, 4, 5), 2, seed=4, dtype=torch.float64, shift_dtype=torch.int64)
    y.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: op(t, shift4), (y,))


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize("shift_dtype", [torch.int32, torch.int64])
def test_shifts_of_any_size(shift_dtype):
    info = torch.iinfo(shift_dtype)
    x = torch.randn(2, 4, 6, 3, dtype=torch.float64, requires_grad=True)
    values = [info.max, info.min, info.max - 1, info.min + 1, 4, -4, 3, -3, 5, -5]
    for a, b in zip(values[::2], values[1::2]):
        shift = torch.tensor([[a, b, 0], [b, a, 1]], dtype=shift_dtype)
        out = op(x, shift)
        torch.testing.assert_close(out, tin_shift_ref(x.detach(), shift), **EXACT)
        (g,) = torch.autograd.grad(out, x, torch.ones_like(out))
        torch.testing.assert_close(g, tin_shift_grad_ref(torch.ones_like(out), shift), **EXACT)
    # |shift| = T - 1 keeps one frame; |shift| >= T none
    one = op(x.detach(), torch.tensor([[3, -3, 4], [-4, 3, 0]], dtype=shift_dtype))
    assert torch.equal(one[0, 3, :2], x.detach()[0, 0, :2]) and torch.equal(one[0, 0, 2:4], x.detach()[0, 3, 2:4])
    assert (one[0, :, 4:] == 0).all() and (one[1, :, :2] == 0).all()


def test_nan_inf_and_signed_zero_pass_unchanged():
    x = torch.tensor([math.nan, -0.0, math.inf, -math.inf]).view(1, 4, 1, 1)
    out = op(x, torch.tensor([[1]]))
    assert out[0, 0].item() == 0.0 and math.copysign(1.0, out[0, 0].item()) == 1.0  # filled frame: +0
    assert math.isnan(out[0, 1].item()) and math.copysign(1.0, out[0, 2].item()) == -1.0
    assert out[0, 3].item() == math.inf


def test_strided_inputs_and_grad_output():
    x, shift = make_inputs((2, 5, 6, 3, 4), 3, seed=6)
    wide = torch.randn(2, 5, 12, 3, 8)[:, :, ::2, :, ::2]
    wide.copy_(x)
    assert not wide.is_contiguous()
    torch.testing.assert_close(op(wide, shift), op(x, shift), **EXACT)
    torch.testing.assert_close(
        op(x, torch.zeros(6, 6, dtype=torch.int32)[::3, ::2].copy_(shift)), op(x, shift), **EXACT
    )
    go = torch.randn(2, 5, 6, 4, 3).transpose(3, 4)
    _, g1 = grad_of(x, shift, go)
    _, g2 = grad_of(x, shift, go.contiguous())
    torch.testing.assert_close(g1, g2, **EXACT)


def test_module_and_functional():
    x, shift = make_inputs((2, 4, 8, 9), 4, seed=8)
    module = mmops.TINShift()
    assert repr(module) == "TINShift()"
    torch.testing.assert_close(module(x, shift), mmops.tin_shift(x, shift), **EXACT)
    scripted = torch.jit.script(module)
    torch.testing.assert_close(scripted(x, shift), module(x, shift), **EXACT)


def test_shift_gets_no_gradient_and_double_backward_is_refused():
    x, shift = make_inputs((1, 3, 2, 3), 2, seed=11, dtype=torch.float64)
    x.requires_grad_(True)
    go = torch.randn(1, 3, 2, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(x, shift), x, go, create_graph=True)


def test_cpu_results_do_not_depend_on_the_thread_count():
    x, shift = make_inputs((4, 8, 64, 7, 7), 8, seed=19)
    go = torch.randn(x.shape, generator=torch.Generator().manual_seed(20))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        out1, g1 = grad_of(x, shift, go)
        torch.set_num_threads(max(2, threads))
        out2, g2 = grad_of(x, shift, go)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(out1, out2) and torch.equal(g1, g2)


def test_autocast_keeps_the_values():
    x, shift = make_inputs((1, 4, 4, 6), 2, seed=10)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = op(x.bfloat16(), shift)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, op(x.bfloat16(), shift), **EXACT)


def test_backward_helper_checks():
    x, shift = make_inputs((2, 3, 4, 5), 2, seed=12)
    with pytest.raises(RuntimeError, match="mmops::tin_shift: .*grad_output to be a 4-D"):
        bwd_op(x[0], shift)
    with pytest.raises(RuntimeError, match="mmops::tin_shift: .*grad_output's C = 4 .* G = 3"):
        bwd_op(x, torch.zeros(2, 3, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="mmops::tin_shift: .*shift to be an int32 or int64"):
        bwd_op(x, shift.double())


# --------------------------------------------------------------------------- the CUDA indexing


def emulate_cuda(x, shift, reverse=False, wide_bytes=16):
    """The CUDA kernel's word walk in Python (tin_shift_cuda.cu): the tensor as words of
    16 bytes where every run of C / G * H * W values holds whole words (else one value per
    word); each word's run gives (n, t, g), its source word is (from - t) frames away."""
    n_, t_, c_ = x.shape[:3]
    groups = shift.shape[1]
    positions = x[0, 0, 0].numel()
    per_wide = wide_bytes // x.element_size()
    per_word = per_wide if (c_ // groups * positions) % per_wide == 0 else 1
    run_words = c_ // groups * positions // per_word
    frame_words = c_ * positions // per_word
    src, out = x.contiguous().view(-1, per_word), torch.empty(x.numel() // per_word, per_word, dtype=x.dtype)
    for w in range(out.shape[0]):
        run = w // run_words
        g, nt = run % groups, run // groups
        t, n = nt % t_, nt // t_
        s = int(shift[n, g])
        if not reverse:
            frm = t - s if s <= t and s > t - t_ else -1
        else:
            frm = t + s if s >= -t and s < t_ - t else -1
        out[w] = src[w + (frm - t) * frame_words] if frm >= 0 else 0
    return out.view(x.shape), per_word


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_cuda_word_indexing_emulation(dtype):
    for i, (shape, groups, _) in enumerate(CUDA_SHAPES[:5]):
        x, shift = make_inputs(shape, groups, seed=60 + i, dtype=dtype)
        for reverse in (False, True):
            got, per_word = emulate_cuda(x, shift, reverse)
            ref = (tin_shift_grad_ref if reverse else tin_shift_ref)(x, shift).to(dtype)
            torch.testing.assert_close(got, ref, **EXACT, msg=f"{shape} reverse={reverse} word={per_word}")


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_reference_and_cpu(dtype):
    for i, (shape, groups, shift_dtype) in enumerate(CUDA_SHAPES + [((8, 8, 256, 14, 14), 8, torch.int32)]):
        x, shift = make_inputs(shape, groups, seed=70 + i, dtype=dtype, shift_dtype=shift_dtype)
        go = torch.randn(shape, generator=torch.Generator().manual_seed(80 + i)).to(dtype)
        out, grad = grad_of(x, shift, go)
        out_c, grad_c = grad_of(x.cuda(), shift.cuda(), go.cuda())
        torch.testing.assert_close(out_c.cpu(), out, **EXACT)
        torch.testing.assert_close(grad_c.cpu(), grad, **EXACT)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_misaligned_views_and_extreme_shifts(dtype):
    # a view whose data is not 16-byte aligned takes the one-value-per-word path
    x, shift = make_inputs((2, 8, 16, 7, 7), 2, seed=90, dtype=dtype)
    flat = torch.empty(x.numel() + 1, dtype=dtype, device="cuda")[1:]
    shifted = flat.view(x.shape)
    shifted.copy_(x.cuda())
    assert shifted.data_ptr() % 16 != 0
    torch.testing.assert_close(op(shifted, shift.cuda()).cpu(), op(x, shift), **EXACT)
    for shift_dtype in (torch.int32, torch.int64):
        info = torch.iinfo(shift_dtype)
        s = torch.tensor([[info.max, info.min], [7, -8]], dtype=shift_dtype)
        torch.testing.assert_close(op(x.cuda(), s.cuda()).cpu(), op(x, s), **EXACT)
        torch.testing.assert_close(bwd_op(x.cuda(), s.cuda()).cpu(), bwd_op(x, s), **EXACT)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_mmcv_known_vectors(dtype):
    _check_mmcv_vectors(mmops.tin_shift, "cuda", dtype)


@pytest.mark.cuda
def test_cuda_empty():
    e = torch.randn(2, 4, 0, 3, device="cuda", requires_grad=True)
    out = op(e, torch.ones(2, 2, dtype=torch.int32, device="cuda"))
    assert out.shape == e.shape
    out.sum().backward()
    assert e.grad.shape == e.shape


# --------------------------------------------------------------------------- mmcv bridge


def test_mmcv_bridge():
    pytest.importorskip("mmengine", reason="mmengine is not installed")
    pytest.importorskip("mmcv", reason="mmcv-lite is not installed")
    import mmops.mmcv_ops  # noqa: F401

    ops = pytest.importorskip("mmcv.ops", reason="mmcv.ops does not import")
    module = importlib.import_module("mmcv.ops.tin_shift")
    _check_mmcv_vectors(ops.tin_shift, "cpu", torch.float32)
    _check_mmcv_vectors(lambda x, s: ops.TINShift()(x, s), "cpu", torch.float64)
    x, shift = make_inputs((2, 5, 12, 3, 7), 4, seed=17, dtype=torch.float64)
    torch.testing.assert_close(module.TINShiftFunction.apply(x, shift), op(x, shift), **EXACT)
    # mmcv's ValueErrors
    with pytest.raises(ValueError, match="batch"):
        ops.tin_shift(x, shift[:1])
    with pytest.raises(ValueError, match="multiple of num_segments"):
        ops.tin_shift(x, torch.zeros(2, 5, dtype=torch.int32))
    with pytest.raises(ValueError, match="multiple of num_segments"):
        ops.tin_shift(x[:, :, :3], shift)
