"""float64 references of upfirdn2d (tests, property tests, benchmarks/bench_upfirdn2d.py).

upfirdn2d_ref: loops over the definition (mmcv's upfirdn2d, flip_filter False): the
input upsampled by zero insertion (up - 1 zeros after each pixel), padded with zeros
(negative pads crop), convolved with the kernel (the flipped kernel slides over the
signal, kept where it lies fully inside) and subsampled (every down-th sample, from
the first). up = [up_x, up_y], down = [down_x, down_y], pad = [x0, x1, y0, y1].

upfirdn2d_composite: the same with torch ops (zero insertion by F.pad of a
[.., H, 1, W, 1] view, F.pad / slicing for the pads, a depthwise F.conv2d with the
flipped kernel, strided slicing), as mmcv's upfirdn2d_native: any dtype, autograd to
any order through conv2d: the benchmark's baseline and a check on larger inputs.
"""

import torch
import torch.nn.functional as F


def _padded_signal(x, up, pad):
    """[N, C, H * up_y + y0 + y1, W * up_x + x0 + x1]: zero-inserted and padded (F.pad crops too)."""
    n, c, h, w = x.shape
    up_x, up_y = up
    u = x.reshape(n, c, h, 1, w, 1)
    u = F.pad(u, [0, up_x - 1, 0, 0, 0, up_y - 1]).reshape(n, c, h * up_y, w * up_x)
    x0, x1, y0, y1 = pad
    u = F.pad(u, [max(x0, 0), max(x1, 0), max(y0, 0), max(y1, 0)])
    return u[:, :, max(-y0, 0) : u.shape[2] - max(-y1, 0), max(-x0, 0) : u.shape[3] - max(-x1, 0)]


def upfirdn2d_ref(x, kernel, up=(1, 1), down=(1, 1), pad=(0, 0, 0, 0)):
    """float64 output of upfirdn2d (loops over every output and tap)."""
    n_, c_, h, w = x.shape
    up_x, up_y = up
    down_x, down_y = down
    x0, _, y0, _ = pad
    kh, kw = kernel.shape
    xd = x.double()
    kd = kernel.double()
    out_h = (h * up_y + pad[2] + pad[3] - kh) // down_y + 1
    out_w = (w * up_x + pad[0] + pad[1] - kw) // down_x + 1
    out = torch.zeros(n_, c_, out_h, out_w, dtype=torch.float64)
    for oy in range(out_h):
        for ox in range(out_w):
            acc = torch.zeros(n_, c_, dtype=torch.float64)
            for ky in range(kh):
                my = oy * down_y - y0 + ky  # position in the zero-inserted, unpadded signal
                if my % up_y or not 0 <= my // up_y < h:
                    continue
                for kx in range(kw):
                    mx = ox * down_x - x0 + kx
                    if mx % up_x or not 0 <= mx // up_x < w:
                        continue
                    # the flipped kernel's tap (ky, kx)
                    acc = acc + xd[:, :, my // up_y, mx // up_x] * kd[kh - 1 - ky, kw - 1 - kx]
            out[:, :, oy, ox] = acc
    return out


def upfirdn2d_composite(x, kernel, up=(1, 1), down=(1, 1), pad=(0, 0, 0, 0)):
    """upfirdn2d with torch ops (mmcv's upfirdn2d_native): x's dtype, autograd to any order."""
    c = x.shape[1]
    u = _padded_signal(x, up, pad)
    weight = kernel.to(x.dtype).flip([0, 1])[None, None].expand(c, 1, *kernel.shape)
    y = F.conv2d(u, weight, groups=c)
    return y[:, :, :: down[1], :: down[0]]
