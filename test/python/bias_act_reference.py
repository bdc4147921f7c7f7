"""float64 references of bias_act (tests, property tests, benchmarks/bench_bias_act.py).

ACTS: every activation with mmcv's default alpha and gain (mmcv's activation_funcs).

bias_act_ref: float64, a loop over the channels of `dim` for the bias, then the activation,
gain and clamp elementwise with torch ops in float64 (formulas written out, not torch.nn's).

derivative_ref: f'(x) or f''(x) of an activation at x + bias, from x (float64), for the
gradients' known values.

bias_act_composite: the same with differentiable torch ops in x's dtype (bias broadcast,
torch.nn.functional's activations, a multiply, torch.clamp), as mmcv's _bias_act_ref: any
dtype, autograd to any order; the benchmark's baseline.
"""

import math

import torch
import torch.nn.functional as F

SQRT2 = math.sqrt(2.0)
SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717

# act: (default alpha, default gain)
ACTS = {
    "linear": (0.0, 1.0),
    "relu": (0.0, SQRT2),
    "lrelu": (0.2, SQRT2),
    "tanh": (0.0, 1.0),
    "sigmoid": (0.0, 1.0),
    "elu": (0.0, 1.0),
    "selu": (0.0, 1.0),
    "softplus": (0.0, 1.0),
    "swish": (0.0, SQRT2),
}


def resolve(act, alpha=None, gain=None):
    def_alpha, def_gain = ACTS[act]
    return float(def_alpha if alpha is None else alpha), float(def_gain if gain is None else gain)


def _add_bias(x, bias, dim):
    out = x.double().clone()
    if bias is None:
        return out
    moved = out.movedim(dim, 0)  # a view: the loop writes into out
    for c in range(moved.shape[0]):
        moved[c] += float(bias[c])
    return out


def activation_ref(v, act, alpha):
    """f(v) for a float64 tensor v."""
    zero = torch.zeros_like(v)
    if act == "linear":
        return v.clone()
    if act == "relu":
        return torch.where(v < 0, zero, v)
    if act == "lrelu":
        return torch.where(v < 0, v * alpha, v)
    if act == "tanh":
        return torch.tanh(v)
    if act == "sigmoid":
        return 1 / (1 + torch.exp(-v))
    if act == "elu":
        return torch.where(v < 0, torch.expm1(v), v)
    if act == "selu":
        return torch.where(v < 0, SELU_SCALE * SELU_ALPHA * torch.expm1(v), SELU_SCALE * v)
    if act == "softplus":
        return torch.clamp_min(v, 0) + torch.log1p(torch.exp(-v.abs()))
    if act == "swish":
        return v / (1 + torch.exp(-v))
    raise ValueError(act)


def derivative_ref(v, act, alpha, order=1):
    """f'(v) (order 1) or f''(v) (order 2) from v = x + bias, float64; kinks take mmcv's rule
    (relu 0 and lrelu alpha at 0, elu and selu their right derivative)."""
    one, zero = torch.ones_like(v), torch.zeros_like(v)
    if act in ("linear", "relu", "lrelu"):
        if order == 2:
            return zero
        return {"linear": one, "relu": (v > 0).double(), "lrelu": torch.where(v > 0, one, one * alpha)}[act]
    if act == "tanh":
        t = activation_ref(v, "tanh", alpha)
        return 1 - t * t if order == 1 else -2 * t * (1 - t * t)
    if act in ("sigmoid", "softplus"):  # softplus' = sigmoid
        s = activation_ref(v, "sigmoid", alpha)
        if act == "softplus":
            return s if order == 1 else s * (1 - s)
        return s * (1 - s) if order == 1 else s * (1 - s) * (1 - 2 * s)
    if act in ("elu", "selu"):
        scale, neg = (1.0, 1.0) if act == "elu" else (SELU_SCALE, SELU_SCALE * SELU_ALPHA)
        return torch.where(v >= 0, one * (scale if order == 1 else 0.0), neg * torch.exp(v))
    if act == "swish":
        s = activation_ref(v, "sigmoid", alpha)
        return s * (1 + v * (1 - s)) if order == 1 else s * (1 - s) * (2 + v * (1 - 2 * s))
    raise ValueError(act)


def bias_act_ref(x, bias=None, dim=1, act="linear", alpha=None, gain=None, clamp=None):
    """float64 output."""
    alpha, gain = resolve(act, alpha, gain)
    y = activation_ref(_add_bias(x, bias, dim), act, alpha) * gain
    if clamp is not None:
        y = torch.where(y < -clamp, -clamp, torch.where(y > clamp, clamp, y))
    return y


def bias_act_grad_ref(grad, x, bias=None, dim=1, act="linear", alpha=None, gain=None, clamp=None, order=1):
    """float64: grad * gain * f^(order)(x + bias), 0 where |f * gain| >= clamp."""
    alpha, gain = resolve(act, alpha, gain)
    v = _add_bias(x, bias, dim)
    g = grad.double() * gain * derivative_ref(v, act, alpha, order)
    if clamp is not None:
        y = activation_ref(v, act, alpha) * gain
        g = torch.where((y > -clamp) & (y < clamp), g, torch.zeros_like(g))
    return g


_TORCH_ACTS = {
    "linear": lambda x, alpha: x,
    "relu": lambda x, alpha: F.relu(x),
    "lrelu": lambda x, alpha: F.leaky_relu(x, alpha),
    "tanh": lambda x, alpha: torch.tanh(x),
    "sigmoid": lambda x, alpha: torch.sigmoid(x),
    "elu": lambda x, alpha: F.elu(x),
    "selu": lambda x, alpha: F.selu(x),
    "softplus": lambda x, alpha: F.softplus(x),
    "swish": lambda x, alpha: torch.sigmoid(x) * x,
}


def bias_act_composite(x, bias=None, dim=1, act="linear", alpha=None, gain=None, clamp=None):
    """bias + activation + gain + clamp with differentiable torch ops (x's dtype)."""
    alpha, gain = resolve(act, alpha, gain)
    if bias is not None:
        x = x + bias.reshape([-1 if i == dim % x.dim() else 1 for i in range(x.dim())])
    y = _TORCH_ACTS[act](x, alpha)
    if gain != 1:
        y = y * gain
    if clamp is not None:
        y = y.clamp(-clamp, clamp)
    return y
