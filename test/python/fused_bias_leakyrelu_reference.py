"""float64 references of fused_bias_leakyrelu (tests, property tests,
benchmarks/bench_fused_bias_leakyrelu.py).

fused_bias_leakyrelu_ref: loops over the (image, channel) rows (mmcv's definition):
leaky_relu(input + bias[c], negative_slope) * scale in float64.

fused_bias_leakyrelu_composite: the same with torch ops (bias broadcast along dim 1,
F.leaky_relu, a multiply), as mmcv's bias_leakyrelu_ref: any dtype, autograd to any order;
the benchmark's baseline.
"""

import torch
import torch.nn.functional as F


def fused_bias_leakyrelu_ref(x, bias, negative_slope=0.2, scale=2**0.5):
    """float64 output (a loop over rows, each row's values elementwise in float64)."""
    xd = x.double().reshape(x.shape[0], x.shape[1], -1)
    out = torch.empty_like(xd)
    for n in range(xd.shape[0]):
        for c in range(xd.shape[1]):
            v = xd[n, c] + float(bias[c])
            out[n, c] = torch.where(v > 0, v, v * negative_slope) * scale
    return out.reshape(x.shape)


def fused_bias_leakyrelu_composite(x, bias, negative_slope=0.2, scale=2**0.5):
    """bias + F.leaky_relu + scale with torch ops (x's dtype)."""
    shape = [1] * x.dim()
    shape[1] = -1
    return F.leaky_relu(x + bias.to(x.dtype).reshape(shape), negative_slope) * scale
