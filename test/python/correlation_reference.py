"""float64 references of correlation (tests, property tests, benchmarks/bench_correlation.py).

correlation_ref: loops over the definition (mmcv's Correlation): output[n, ph, pw, oh, ow]
= sum over the kernel taps (i, j) of the channel dot product input1[n, :, y, x] .
input2[n, :, y + dy, x + dx], with (y, x) = (oh * stride - padding + i * dilation, ...)
and (dy, dx) = ((ph, pw) - max_displacement) * dilation_patch; a tap with either pixel
outside the map adds 0; no normalisation. P = 2 * max_displacement + 1, oH = max(0,
(H + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1). Differentiable w.r.t.
both inputs (torch ops), so autograd through it gives the reference gradients.

correlation_composite: the same vectorised (zero padding, one shifted product summed over
C per displacement, the kernel window summed by conv2d with a ones kernel): the
benchmark's baseline and a check on larger inputs.
"""

import torch
import torch.nn.functional as F


def out_side(size, kernel, stride, pad, dilation):
    return max(0, (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1)


def correlation_ref(x1, x2, kernel_size=(1, 1), max_displacement=1, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                    dilation_patch=(1, 1)):  # fmt: skip
    """float64 output of correlation (loops; small inputs)."""
    n_, _, h, w = x1.shape
    x1, x2 = x1.double(), x2.double()
    patch = 2 * max_displacement + 1
    oh_, ow_ = (out_side(s, kernel_size[a], stride[a], padding[a], dilation[a]) for a, s in enumerate((h, w)))
    values = []
    for n in range(n_):
        for ph in range(patch):
            dy = (ph - max_displacement) * dilation_patch[0]
            for pw in range(patch):
                dx = (pw - max_displacement) * dilation_patch[1]
                for oh in range(oh_):
                    for ow in range(ow_):
                        total = x1.new_zeros(())
                        for i in range(kernel_size[0]):
                            y = oh * stride[0] - padding[0] + i * dilation[0]
                            if not (0 <= y < h and 0 <= y + dy < h):
                                continue
                            for j in range(kernel_size[1]):
                                x = ow * stride[1] - padding[1] + j * dilation[1]
                                if 0 <= x < w and 0 <= x + dx < w:
                                    total = total + (x1[n, :, y, x] * x2[n, :, y + dy, x + dx]).sum()
                        values.append(total)
    if not values:
        return x1.new_zeros(n_, patch, patch, oh_, ow_)
    return torch.stack(values).view(n_, patch, patch, oh_, ow_)


def correlation_composite(x1, x2, kernel_size=(1, 1), max_displacement=1, stride=(1, 1), padding=(0, 0),
                          dilation=(1, 1), dilation_patch=(1, 1)):  # fmt: skip
    """correlation with padded shifted products and conv2d (vectorised; x1's dtype)."""
    n, _, h, w = x1.shape
    patch = 2 * max_displacement + 1
    ry, rx = max_displacement * dilation_patch[0], max_displacement * dilation_patch[1]
    hp, wp = h + 2 * padding[0], w + 2 * padding[1]
    x1p = F.pad(x1, (padding[1], padding[1], padding[0], padding[0]))
    x2p = F.pad(x2, (padding[1] + rx, padding[1] + rx, padding[0] + ry, padding[0] + ry))
    ones = torch.ones(1, 1, kernel_size[0], kernel_size[1], dtype=x1.dtype, device=x1.device)
    maps = []
    for ph in range(patch):
        dy = (ph - max_displacement) * dilation_patch[0]
        for pw in range(patch):
            dx = (pw - max_displacement) * dilation_patch[1]
            shifted = x2p[:, :, ry + dy : ry + dy + hp, rx + dx : rx + dx + wp]
            product = (x1p * shifted).sum(1, keepdim=True)
            maps.append(F.conv2d(product, ones, stride=tuple(stride), dilation=tuple(dilation)))
    out = torch.cat(maps, 1)
    return out.view(n, patch, patch, out.shape[-2], out.shape[-1])
