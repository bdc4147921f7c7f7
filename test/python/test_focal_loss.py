"""Tests of mmops::sigmoid_focal_loss and mmops::softmax_focal_loss: the conformance
cases, then float64 references, known values, gradcheck, torchvision, class-id checks,
the Python API and the CUDA-specific tests."""

import math

import pytest
import torch
import torch.nn.functional as F
from conformance import BadInput, ConformanceCase, ConformanceSuite, Sample
from conftest import TOL, assert_same_fwd_bwd, capture_cuda_graph, requires_torchvision, strict_index_check

import mmops

sig = torch.ops.mmops.sigmoid_focal_loss
soft = torch.ops.mmops.softmax_focal_loss
OPS = {"sigmoid": sig, "softmax": soft}
REDUCTIONS = ["none", "mean", "sum"]


# --------------------------------------------------------------------------- references (float64)


def sigmoid_ref(x, t, gamma, alpha, weight=None, reduction="mean"):
    """mmcv's sigmoid focal loss in plain PyTorch, float64 (differentiable)."""
    x = x.double()
    N, C = x.shape
    onehot = F.one_hot(t, C + 1)[:, :C].double()  # target C = background: no positive class
    p = torch.sigmoid(x)
    pos = -alpha * (1 - p) ** gamma * F.logsigmoid(x)
    neg = -(1 - alpha) * p**gamma * F.logsigmoid(-x)
    loss = onehot * pos + (1 - onehot) * neg
    if weight is not None:
        w = torch.where(t < C, weight.double()[t.clamp(max=C - 1)], torch.ones((), dtype=torch.float64))
        loss = loss * w[:, None]
    return _reduce(loss, reduction, N)


def softmax_ref(x, t, gamma, alpha, weight=None, reduction="mean"):
    """mmcv's softmax focal loss in plain PyTorch, float64 (differentiable)."""
    x = x.double()
    N = x.shape[0]
    logp = torch.log_softmax(x, dim=1).gather(1, t[:, None])[:, 0]
    loss = -alpha * (1 - logp.exp()) ** gamma * logp
    if weight is not None:
        loss = loss * weight.double()[t]
    return _reduce(loss, reduction, N)


def _reduce(loss, reduction, n):
    if reduction == "mean":
        return loss.sum() / n  # mmcv: divided by the number of rows
    if reduction == "sum":
        return loss.sum()
    return loss


REFS = {"sigmoid": sigmoid_ref, "softmax": softmax_ref}


def make(kind, N, C, dtype=torch.float32, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(N, C, generator=g, dtype=torch.float64) * scale).to(dtype)
    hi = C + 1 if kind == "sigmoid" else C
    t = torch.randint(0, hi, (N,), generator=g)
    w = (torch.rand(C, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    return x, t, w


def fwd_bwd(kind, x, t, gamma, alpha, w, reduction, go=None):
    x = x.detach().requires_grad_(True)
    out = OPS[kind](x, t, gamma, alpha, w, reduction)
    if go is None:
        go = torch.randn(out.shape, dtype=torch.float64).to(device=out.device, dtype=out.dtype)
    (g,) = torch.autograd.grad(out, x, go)
    return out, g, go


def ref_fwd_bwd(kind, x, t, gamma, alpha, w, reduction, go):
    xr = x.detach().double().requires_grad_(True)
    out = REFS[kind](xr, t, gamma, alpha, w, reduction)
    (g,) = torch.autograd.grad(out, xr, go.double())
    return out.detach(), g


# --------------------------------------------------------------------------- conformance

CUDA_TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-6),
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float16: dict(rtol=1e-2, atol=1e-3),
    torch.bfloat16: dict(rtol=2e-2, atol=1e-2),
}


def _sample(kind, reduction, weighted, sizes=((9, 5), (9, 5)), seed=10):
    def sample(device, dtype, size):
        N, C = sizes[size]
        x, t, w = make(kind, N, C, dtype, seed + size)
        return Sample((x.to(device), t.to(device), 2.0, 0.25, w.to(device) if weighted else None, reduction))

    return sample


def _empty(kind, reduction, weighted):
    """No rows (the mean of none is NaN: test_empty_input_values); no classes."""

    def empty(device, dtype):
        f = dict(dtype=dtype, device=device)
        x, t = torch.zeros(0, 5, **f), torch.zeros(0, dtype=torch.long, device=device)
        w = torch.ones(5, **f) if weighted else None
        shape = {"none": (0, 5) if kind == "sigmoid" else (0,), "sum": ()}[reduction]
        samples = [Sample((x, t, 2.0, 0.25, w, reduction), out_shapes=[shape])]
        if kind == "sigmoid" and not weighted:  # no classes: every row is background, none has elements
            samples.append(
                Sample(
                    (
                        torch.zeros(3, 0, **f),
                        torch.zeros(3, dtype=torch.long, device=device),
                        2.0,
                        0.25,
                        None,
                        reduction,
                    ),
                    out_shapes=[(3, 0) if reduction == "none" else ()],
                )
            )
        return samples

    return empty


def _cuda_samples(kind, reduction, weighted):
    """Tiny, one partial block, many blocks (the reduction grid), a wide row (softmax
    over more than 32 classes)."""

    def samples(dtype):
        for seed, (N, C) in enumerate([(1, 1), (7, 3), (4096, 80), (517, 1000), (100003, 3)]):
            if kind == "softmax" and C == 1:
                C = 2
            x, t, w = make(kind, N, C, dtype, seed)
            yield Sample((x, t, 0.5, 0.25, w, reduction) if weighted else (x, t, 2.0, 0.25, None, reduction))

    return samples


_WEIGHT = [0.5, 1.0, 2.0, 0.25, 1.5]


class _Net(torch.nn.Module):
    """Both focal losses in a model: the ops on computed inputs, the functional wrapper and
    the modules (class weights as buffers) on the first 5 classes."""

    def __init__(self):
        super().__init__()
        self.weighted_sum = mmops.SigmoidFocalLoss(2.0, 0.25, torch.tensor(_WEIGHT), "sum")
        self.softmax = mmops.SoftmaxFocalLoss(1.0, 0.5)
        self.softmax_weighted = mmops.SoftmaxFocalLoss(2.0, 0.25, torch.tensor(_WEIGHT), "none")

    def forward(self, x: torch.Tensor, t: torch.Tensor, w: torch.Tensor):
        soft_t = t.clamp(max=x.shape[1] - 1)
        a = torch.ops.mmops.sigmoid_focal_loss(x * 2.0, t, 2.0, 0.25, w, "none").sum(dim=1)
        b = torch.ops.mmops.softmax_focal_loss(x, soft_t, 1.0, 0.5, None, "none")
        # (x + 1.0: TorchScript merges identical calls, which would change the order in which the
        # gradients of the outputs are summed, and so their rounding)
        computed = (a + b).sin().sum() + mmops.sigmoid_focal_loss(x + 1.0, t)
        five, t5 = x[:, :5], t.clamp(max=5)  # sigmoid: class 5 is the background of 5 classes
        net = (
            self.weighted_sum(five, t5)
            + self.softmax(x * 0.5, soft_t)
            + torch.ops.mmops.sigmoid_focal_loss(x, t, reduction="mean")
        )
        return computed, net, self.softmax_weighted(five, t5.clamp(max=4))


def _helpers(kind):
    def helpers(sample):
        x, t, gamma, alpha, w, reduction = sample.args
        out = OPS[kind](*sample.args)
        bwd = getattr(torch.ops.mmops, f"_{kind}_focal_loss_backward")
        return [(bwd, (torch.randn_like(out), x, t, gamma, alpha, w, reduction))]

    return helpers


def _bad_inputs(kind):
    def bad(make_args, match):
        return BadInput(lambda x, t, g, a, w, r: make_args(x, t, w), f"mmops::{kind}_focal_loss: .*{match}")

    return {
        "input_1d": bad(lambda x, t, w: (x[0], t, 2.0, 0.25, None, "mean"), "input"),
        "input_3d": bad(lambda x, t, w: (x[None], t, 2.0, 0.25, None, "mean"), "input"),
        "int_input": bad(lambda x, t, w: (x.long(), t, 2.0, 0.25, None, "mean"), "input"),
        "target_float": bad(lambda x, t, w: (x, t.float(), 2.0, 0.25, None, "mean"), "target"),
        "target_int32": bad(lambda x, t, w: (x, t.int(), 2.0, 0.25, None, "mean"), "target"),
        "target_2d": bad(lambda x, t, w: (x, t[:, None], 2.0, 0.25, None, "mean"), "target"),
        "target_length": bad(lambda x, t, w: (x, t[:5], 2.0, 0.25, None, "mean"), "target"),
        "weight_length": bad(lambda x, t, w: (x, t, 2.0, 0.25, w[:3], "mean"), "weight"),
        "weight_2d": bad(lambda x, t, w: (x, t, 2.0, 0.25, w[None], "mean"), "weight"),
        "weight_dtype": bad(lambda x, t, w: (x, t, 2.0, 0.25, w.double(), "mean"), "weight"),
        "reduction": bad(lambda x, t, w: (x, t, 2.0, 0.25, None, "avg"), "reduction"),
        "reduction_case": bad(lambda x, t, w: (x, t, 2.0, 0.25, None, "Mean"), "reduction"),
        "gamma_negative": bad(lambda x, t, w: (x, t, -1.0, 0.25, None, "mean"), "gamma"),
        "gamma_nan": bad(lambda x, t, w: (x, t, math.nan, 0.25, None, "mean"), "gamma"),
        "alpha_inf": bad(lambda x, t, w: (x, t, 2.0, math.inf, None, "mean"), "alpha"),
    }


def _case(kind, reduction, weighted):
    name = f"{kind}_focal_loss_{reduction}" + ("_weighted" if weighted else "")
    sample, module = _sample(kind, reduction, weighted), None
    if kind == "sigmoid" and reduction == "none" and weighted:  # the model's case: two sizes
        sample, module = _sample(kind, reduction, weighted, sizes=((20, 7), (33, 6)), seed=11), _Net
    return ConformanceCase(
        name,
        OPS[kind],
        sample,
        grad_args=(0,),
        empty=None if reduction == "mean" else _empty(kind, reduction, weighted),
        bad_inputs=_bad_inputs(kind) if reduction == "mean" and weighted else {},
        module=module,
        helpers=_helpers(kind),
        cuda_samples=_cuda_samples(kind, reduction, weighted),
        cuda_tol=lambda dtype, what, expected, sample: CUDA_TOL[dtype],
    )


class TestFocalLossConformance(ConformanceSuite):
    cases = [
        _case(kind, reduction, weighted)
        for kind in ("sigmoid", "softmax")
        for reduction in REDUCTIONS
        for weighted in (False, True)
    ]


# --------------------------------------------------------------------------- forward / backward


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("with_weight", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kind", ["sigmoid", "softmax"])
def test_matches_reference(kind, reduction, with_weight, dtype):
    for seed, (N, C) in enumerate([(1, 1), (7, 3), (64, 80), (300, 37)]):
        if kind == "softmax" and C == 1:
            C = 2
        for gamma, alpha in ((2.0, 0.25), (0.0, 0.5), (0.5, 0.75), (1.0, 0.25), (3.5, 0.1)):
            x, t, w = make(kind, N, C, dtype, seed)
            w = w if with_weight else None
            out, g, go = fwd_bwd(kind, x, t, gamma, alpha, w, reduction)
            exp, gexp = ref_fwd_bwd(kind, x, t, gamma, alpha, w, reduction, go)
            assert out.dtype == dtype and out.shape == exp.shape
            assert g.dtype == dtype and g.shape == x.shape
            tol = TOL[dtype] if dtype == torch.float64 else dict(rtol=2e-5, atol=2e-6)
            torch.testing.assert_close(out.double(), exp, **tol)
            torch.testing.assert_close(g.double(), gexp, **tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kind", ["sigmoid", "softmax"])
def test_low_precision_matches_reference(kind, reduction, dtype):
    x, t, w = make(kind, 96, 20, dtype, seed=3)
    for weight in (None, w):
        out, g, go = fwd_bwd(kind, x, t, 2.0, 0.25, weight, reduction)
        exp, gexp = ref_fwd_bwd(kind, x, t, 2.0, 0.25, weight, reduction, go)
        assert out.dtype == dtype and g.dtype == dtype
        torch.testing.assert_close(out.double(), exp, **TOL[dtype])
        torch.testing.assert_close(g.double(), gexp, **TOL[dtype])


# mmcv's tests/test_ops/test_focal_loss.py: gamma 2, alpha 0.25, reduction "mean";
# (logits, target, softmax (loss, grad), sigmoid (loss, grad)), given to 8 decimals.
MMCV_INPUTS = [
    ([[1.0, 0], [0, 1.0]], [0, 1]),
    ([[1.0, 0, -1.0], [0, 1.0, 2.0]], [2, 1]),
    ([[1e-6, 2e-6, 3e-6], [4e-6, 5e-5, 6e-4], [7e-3, 8e-2, 9e-1]], [1, 2, 0]),
]
MMCV_SOFTMAX = [
    (0.00566451, [[-0.00657264, 0.00657264], [0.00657264, -0.00657264]]),
    (0.34956908, [[0.10165970, 0.03739851, -0.13905823], [0.01227554, -0.10298023, 0.09070466]]),
    (
        0.15754992,
        [
            [0.02590877, -0.05181759, 0.02590882],
            [0.02589641, 0.02589760, -0.05179400],
            [-0.07307514, 0.02234372, 0.05073142],
        ],
    ),
]
MMCV_SIGMOID = [
    (0.13562961, [[-0.00657264, 0.11185755], [0.11185755, -0.00657264]]),
    (1.10251057, [[0.28808805, 0.11185755, -0.09602935], [0.11185755, -0.00657264, 0.40376765]]),
    (
        0.42287254,
        [
            [0.07457182, -0.02485716, 0.07457201],
            [0.07457211, 0.07457669, -0.02483728],
            [-0.02462499, 0.08277918, 0.18050370],
        ],
    ),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", range(len(MMCV_INPUTS)))
@pytest.mark.parametrize("kind", ["sigmoid", "softmax"])
def test_mmcv_known_vectors(kind, case, dtype):
    logits, target = MMCV_INPUTS[case]
    loss, grad = (MMCV_SIGMOID if kind == "sigmoid" else MMCV_SOFTMAX)[case]
    x = torch.tensor(logits, dtype=dtype, requires_grad=True)
    module = mmops.SigmoidFocalLoss(2.0, 0.25) if kind == "sigmoid" else mmops.SoftmaxFocalLoss(2.0, 0.25)
    out = module(x, torch.tensor(target))
    out.backward()
    torch.testing.assert_close(out, torch.tensor(loss, dtype=dtype), rtol=2e-6, atol=1e-8)
    torch.testing.assert_close(x.grad, torch.tensor(grad, dtype=dtype), rtol=2e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mmcv_large_logit_background_vector(dtype):
    # mmcv's test_sigmoid_large_logits_background: target C = background, every class negative
    x = torch.tensor([[100.0, -100.0]], dtype=dtype, requires_grad=True)
    loss = sig(x, torch.tensor([2]), 2.0, 0.25, None, "none")
    loss.sum().backward()
    torch.testing.assert_close(loss, torch.tensor([[75.0, 0.0]], dtype=dtype))
    torch.testing.assert_close(x.grad, torch.tensor([[0.75, 0.0]], dtype=dtype))


def test_known_values():
    # x = 0: p = 1/2. Positive: 0.25 * 0.5^2 * log 2; negative: 0.75 * 0.5^2 * log 2.
    ln2 = math.log(2.0)
    x = torch.zeros(2, 3, dtype=torch.float64)
    t = torch.tensor([1, 3])  # row 1 is background
    out = sig(x, t, 2.0, 0.25, None, "none")
    exp = torch.tensor([[0.1875 * ln2, 0.0625 * ln2, 0.1875 * ln2], [0.1875 * ln2] * 3], dtype=torch.float64)
    torch.testing.assert_close(out, exp, rtol=1e-14, atol=0)
    torch.testing.assert_close(sig(x, t, 2.0, 0.25, None, "sum"), exp.sum(), rtol=1e-14, atol=0)
    torch.testing.assert_close(sig(x, t, 2.0, 0.25, None, "mean"), exp.sum() / 2, rtol=1e-14, atol=0)
    # gradients at x = 0 (gamma = 2): positive -alpha/4 * (1/2 + 2 * 1/2 * ln2) ...
    xg = x.clone().requires_grad_(True)
    sig(xg, t, 2.0, 0.25, None, "sum").backward()
    gp = -0.25 * 0.25 * (0.5 - 2 * 0.5 * -ln2)
    gn = -0.75 * 0.25 * (2 * 0.5 * -ln2 - 0.5)
    torch.testing.assert_close(
        xg.grad, torch.tensor([[gn, gp, gn], [gn, gn, gn]], dtype=torch.float64), rtol=1e-14, atol=0
    )
    # class weights: row 0 (class 1) scaled by weight[1], background row by 1
    w = torch.tensor([2.0, 3.0, 5.0], dtype=torch.float64)
    torch.testing.assert_close(sig(x, t, 2.0, 0.25, w, "none"), exp * torch.tensor([[3.0], [1.0]], dtype=torch.float64))
    # softmax, uniform logits over 4 classes: p = 1/4, loss = 0.25 * (3/4)^2 * ln 4
    xs = torch.zeros(3, 4, dtype=torch.float64)
    ts = torch.tensor([0, 2, 3])
    out = soft(xs, ts, 2.0, 0.25, None, "none")
    torch.testing.assert_close(
        out, torch.full((3,), 0.25 * 0.5625 * math.log(4.0), dtype=torch.float64), rtol=1e-14, atol=0
    )
    ws = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    torch.testing.assert_close(soft(xs, ts, 2.0, 0.25, ws, "sum").item(), 8.0 * 0.25 * 0.5625 * math.log(4.0))


def test_background_and_extreme_logits():
    x = torch.tensor([[100.0, -100.0, 0.0], [-100.0, 100.0, 30.0], [-800.0, 800.0, 5.0]], dtype=torch.float64)
    t = torch.tensor([0, 3, 2])
    for kind in ("sigmoid", "softmax"):
        tt = t.clamp(max=2) if kind == "softmax" else t
        for reduction in REDUCTIONS:
            out, g, go = fwd_bwd(kind, x, tt, 2.0, 0.25, None, reduction)
            exp, gexp = ref_fwd_bwd(kind, x, tt, 2.0, 0.25, None, reduction, go)
            assert torch.isfinite(out).all() and torch.isfinite(g).all()
            torch.testing.assert_close(out, exp)
            torch.testing.assert_close(g, gexp)
    # float32 keeps large logits finite too
    out, g, _ = fwd_bwd("sigmoid", x.float(), t, 2.0, 0.25, None, "sum")
    assert torch.isfinite(out) and torch.isfinite(g).all()
    # softmax in float32: the last row's p_t (exp(-795)) underflows, its log p_t must not
    tt = t.clamp(max=2)
    for reduction in REDUCTIONS:
        out, g, go = fwd_bwd("softmax", x.float(), tt, 2.0, 0.25, None, reduction)
        exp, gexp = ref_fwd_bwd("softmax", x, tt, 2.0, 0.25, None, reduction, go.double())
        torch.testing.assert_close(out.double(), exp, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(g.double(), gexp, rtol=1e-5, atol=1e-6)


def test_cpu_reduction_does_not_depend_on_threads():
    x, t, w = make("sigmoid", 5000, 17, torch.float32, seed=4)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = [sig(x, t, 2.0, 0.25, w, "mean"), soft(x, t.clamp(max=16), 2.0, 0.25, w, "sum")]
        torch.set_num_threads(max(2, before))
        b = [sig(x, t, 2.0, 0.25, w, "mean"), soft(x, t.clamp(max=16), 2.0, 0.25, w, "sum")]
    finally:
        torch.set_num_threads(before)
    for u, v in zip(a, b):
        assert torch.equal(u, v)


@pytest.mark.parametrize("kind", ["sigmoid", "softmax"])
def test_empty_input_values(kind):
    op = OPS[kind]
    x = torch.zeros(0, 5)
    t = torch.zeros(0, dtype=torch.long)
    assert op(x, t, 2.0, 0.25, None, "sum").item() == 0.0
    assert math.isnan(op(x, t, 2.0, 0.25, None, "mean").item())  # 0 / 0, as torch.mean
    if kind == "sigmoid":  # no classes: every row is background and has no elements
        assert op(torch.zeros(3, 0), torch.zeros(3, dtype=torch.long), 2.0, 0.25, None, "mean").item() == 0.0


def test_noncontiguous_inputs():
    x, t, w = make("sigmoid", 40, 9, torch.float64, seed=5)
    xt = torch.empty(9, 40, dtype=torch.float64).t()
    xt.copy_(x)
    tt = torch.stack([t, t], 1)[:, 0]
    wt = torch.stack([w, w], 1)[:, 1]
    assert not (xt.is_contiguous() or tt.is_contiguous() or wt.is_contiguous())
    for kind in ("sigmoid", "softmax"):
        tk, tkt = (t, tt) if kind == "sigmoid" else (t.clamp(max=8), tt.clamp(max=8))
        for reduction in REDUCTIONS:
            a, ga, go = fwd_bwd(kind, xt, tkt, 2.0, 0.25, wt, reduction)
            b, gb, _ = fwd_bwd(kind, x, tk, 2.0, 0.25, w, reduction, go)
            torch.testing.assert_close(a, b, rtol=0, atol=0)
            torch.testing.assert_close(ga, gb, rtol=0, atol=0)


# --------------------------------------------------------------------------- gradcheck


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kind", ["sigmoid", "softmax"])
def test_gradcheck(kind, reduction):
    x, t, w = make(kind, 6, 4, torch.float64, seed=6, scale=1.5)
    x.requires_grad_(True)
    for gamma in (2.0, 0.5):
        for weight in (None, w):
            assert torch.autograd.gradcheck(lambda v: OPS[kind](v, t, gamma, 0.25, weight, reduction), (x,))


def test_double_backward_raises():
    x, t, _ = make("sigmoid", 4, 3, torch.float64)
    x.requires_grad_(True)
    out = sig(x, t, 2.0, 0.25, None, "none")
    go = torch.randn_like(out, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        (g,) = torch.autograd.grad(out, x, go, create_graph=True)
        torch.autograd.grad(g.sum(), (x, go))


def test_weight_gets_no_gradient():
    x, t, w = make("softmax", 5, 3, torch.float64)
    x.requires_grad_(True)
    w.requires_grad_(True)
    soft(x, t, 2.0, 0.25, w, "sum").backward()
    assert x.grad is not None and w.grad is None


# --------------------------------------------------------------------------- torchvision


@requires_torchvision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_sigmoid_matches_torchvision(reduction, dtype):
    from torchvision.ops import sigmoid_focal_loss as tv_sigmoid_focal_loss

    x, t, _ = make("sigmoid", 128, 21, dtype, seed=7)
    onehot = F.one_hot(t, 22)[:, :21].to(dtype)
    for gamma, alpha in ((2.0, 0.25), (1.0, 0.5), (0.0, 0.75)):
        xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        out = sig(xa, t, gamma, alpha, None, reduction)
        exp = tv_sigmoid_focal_loss(xb, onehot, alpha, gamma, "sum" if reduction == "mean" else reduction)
        if reduction == "mean":  # torchvision's mean divides by N * C, mmcv's by N
            exp = exp / x.shape[0]
        tol = TOL[dtype] if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
        go = torch.randn_like(out)
        assert_same_fwd_bwd(out, exp, xa, xb, go, tol, tol)


# --------------------------------------------------------------------------- errors


def _good():
    x, t, w = make("sigmoid", 6, 4)
    return x, t.clamp(max=3), w


@pytest.mark.parametrize(
    "kind,bad", [("sigmoid", -1), ("sigmoid", 5), ("sigmoid", 100), ("softmax", -1), ("softmax", 4)]
)
def test_bad_class_id_raises_on_cpu(kind, bad):
    x, t, _ = _good()
    t[3] = bad
    with pytest.raises(RuntimeError, match=rf"target must hold class ids .* but target\[3\] = {bad}"):
        OPS[kind](x, t, 2.0, 0.25, None, "mean")
    bwd = getattr(torch.ops.mmops, f"_{kind}_focal_loss_backward")
    with pytest.raises(RuntimeError, match="class ids"):
        bwd(torch.ones(()), x, t, 2.0, 0.25, None, "mean")


def test_sigmoid_accepts_background_class():
    x, t, _ = _good()
    t[:] = 4  # C: background
    out = sig(x, t, 2.0, 0.25, None, "none")
    torch.testing.assert_close(out.double(), sigmoid_ref(x, t, 2.0, 0.25, None, "none"))


def test_backward_helper_checks_grad_output():
    x, t, _ = _good()
    bwd = torch.ops.mmops._sigmoid_focal_loss_backward
    with pytest.raises(RuntimeError, match="grad_output"):
        bwd(torch.ones(3), x, t, 2.0, 0.25, None, "mean")
    with pytest.raises(RuntimeError, match="grad_output"):
        bwd(torch.ones(6), x, t, 2.0, 0.25, None, "none")
    with pytest.raises(RuntimeError, match="grad_output"):
        torch.ops.mmops._softmax_focal_loss_backward(torch.ones(6, 4), x, t, 2.0, 0.25, None, "none")


# --------------------------------------------------------------------------- Python API


def test_functional_defaults_and_modules():
    x, t, w = make("softmax", 10, 5, torch.float64, seed=8)
    torch.testing.assert_close(mmops.sigmoid_focal_loss(x, t), sig(x, t, 2.0, 0.25, None, "mean"), rtol=0, atol=0)
    torch.testing.assert_close(sig(x, t), sig(x, t, 2.0, 0.25, None, "mean"), rtol=0, atol=0)
    torch.testing.assert_close(
        mmops.softmax_focal_loss(x, t, 1.0, 0.5, w, "sum"), soft(x, t, 1.0, 0.5, w, "sum"), rtol=0, atol=0
    )
    # mmcv's argument order: (gamma, alpha, weight, reduction)
    m = mmops.SigmoidFocalLoss(1.5, 0.3, w, "none")
    torch.testing.assert_close(m(x, t), sig(x, t, 1.5, 0.3, w, "none"), rtol=0, atol=0)
    assert repr(m) == "SigmoidFocalLoss(gamma=1.5, alpha=0.3, reduction=none)"
    assert "weight" in dict(m.named_buffers())
    m2 = mmops.SoftmaxFocalLoss(gamma=2.0, alpha=0.25)
    torch.testing.assert_close(m2(x, t), soft(x, t, 2.0, 0.25, None, "mean"), rtol=0, atol=0)
    assert repr(m2) == "SoftmaxFocalLoss(gamma=2.0, alpha=0.25, reduction=mean)"
    with pytest.raises(ValueError, match="reduction"):
        mmops.SoftmaxFocalLoss(2.0, 0.25, None, "avg")


# --------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["sigmoid", "softmax"])
def test_cuda_reduction_is_repeatable(kind):
    x, t, w = make(kind, 65536, 80, torch.float32, seed=12)
    x, t, w = x.cuda(), t.cuda(), w.cuda()
    first = OPS[kind](x, t, 2.0, 0.25, w, "mean")
    for _ in range(5):
        assert torch.equal(OPS[kind](x, t, 2.0, 0.25, w, "mean"), first)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["sigmoid", "softmax"])
def test_cuda_invalid_class_id_row_contributes_zero(kind):
    x, t, w = make(kind, 50, 6, torch.float32, seed=13)
    bad = [0, 7, 30]
    t_bad = t.clone()
    for row, v in zip(bad, (-1, 7, 1000)):
        t_bad[row] = v
    good = [i for i in range(50) if i not in bad]
    with strict_index_check(False):
        none, g, go = fwd_bwd(kind, x.cuda(), t_bad.cuda(), 2.0, 0.25, w.cuda(), "none")
        total = OPS[kind](x.cuda(), t_bad.cuda(), 2.0, 0.25, w.cuda(), "sum")
    torch.cuda.synchronize()
    assert torch.equal(none[bad].cpu(), torch.zeros_like(none[bad].cpu()))
    assert torch.equal(g[bad].cpu(), torch.zeros_like(g[bad].cpu()))
    exp, gexp, _ = fwd_bwd(kind, x[good], t[good], 2.0, 0.25, w, "none", go[good].cpu())
    torch.testing.assert_close(none[good].cpu(), exp, **CUDA_TOL[torch.float32])
    torch.testing.assert_close(g[good].cpu(), gexp, **CUDA_TOL[torch.float32])
    torch.testing.assert_close(total.cpu(), exp.sum(), rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["sigmoid", "softmax"])
def test_cuda_strict_index_check_raises(kind):
    x, t, _ = make(kind, 8, 4, seed=14)
    t[2] = 9
    with strict_index_check(True):
        with pytest.raises(RuntimeError, match="class ids"):
            OPS[kind](x.cuda(), t.cuda(), 2.0, 0.25, None, "mean")
        t[2] = 1
        OPS[kind](x.cuda(), t.cuda(), 2.0, 0.25, None, "mean")


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["sigmoid", "softmax"])
def test_cuda_graph_capture(kind):
    x, t, w = make(kind, 1000, 80, seed=15)
    x, t, w = x.cuda(), t.cuda(), w.cuda()
    op = OPS[kind]
    static_out = op(x, t, 2.0, 0.25, w, "mean")
    with strict_index_check(True):  # skipped while capturing
        g, static_out = capture_cuda_graph(lambda: op(x, t, 2.0, 0.25, w, "mean"), warmups=1)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(
        static_out.cpu(), op(x.cpu(), t.cpu(), 2.0, 0.25, w.cpu(), "mean"), **CUDA_TOL[torch.float32]
    )
