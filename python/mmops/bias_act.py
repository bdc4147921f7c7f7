"""bias_act: the functional wrapper of mmcv.ops.bias_act (StyleGAN2-ADA / StyleGAN3's fused
bias and activation). mmcv has no module for it."""

from typing import Optional

import torch
from torch import Tensor

# The activations and mmcv's defaults (alpha, gain) of each (docs/ops/bias_act.md).
ACTIVATIONS = ("linear", "relu", "lrelu", "tanh", "sigmoid", "elu", "selu", "softplus", "swish")


def bias_act(
    input: Tensor,
    bias: Optional[Tensor] = None,
    dim: int = 1,
    act: str = "linear",
    alpha: Optional[float] = None,
    gain: Optional[float] = None,
    clamp: Optional[float] = None,
) -> Tensor:
    """mmcv.ops.bias_act: clamp(f(input + bias along dim) * gain, -clamp, clamp) for an act of
    ACTIVATIONS; alpha (lrelu's slope) and gain default to mmcv's per act, no clamp when clamp is
    None. bias: [input.shape[dim]] of input's dtype, or None (dim is then ignored). Differentiable
    w.r.t. input and bias to the second order."""
    return torch.ops.mmops.bias_act(
        input,
        bias,
        int(dim),
        act,
        None if alpha is None else float(alpha),
        None if gain is None else float(gain),
        None if clamp is None else float(clamp),
    )


__all__ = ["bias_act"]
