"""float64 references of filtered_lrelu (tests, benchmarks/bench_filtered_lrelu.py).

filtered_lrelu_ref: the op's definition with torch ops, written from the semantics
(StyleGAN3 / mmcv's filtered_lrelu), filters taken as the op takes them (2-D, a
convolution, no gain): bias added, zero insertion by F.pad of a [.., H, 1, W, 1] view,
zero padding (negative pads crop), a depthwise F.conv2d with the flipped up filter
(valid positions only), leaky ReLU times gain, clamp, F.conv2d with the flipped down
filter, every down-th sample from the first. Any dtype, autograd to any order: the
benchmark's baseline too (run it in the input's dtype).

filtered_lrelu_mmcv_ref: mmcv's conventions on top (filters [fh, fw], [taps] or None;
filter_up scaled by up ** 2; flip_filter; padding int, [x, y] or [x0, x1, y0, y1]).
"""

import math

import torch
import torch.nn.functional as F


def _zero_insert_and_pad(x, up, pad):
    """[N, C, H * up + y0 + y1, W * up + x0 + x1]: zero-inserted, then padded (or cropped)."""
    n, c, h, w = x.shape
    u = x.reshape(n, c, h, 1, w, 1)
    u = F.pad(u, [0, up - 1, 0, 0, 0, up - 1]).reshape(n, c, h * up, w * up)
    x0, x1, y0, y1 = pad
    u = F.pad(u, [max(x0, 0), max(x1, 0), max(y0, 0), max(y1, 0)])
    return u[:, :, max(-y0, 0) : u.shape[2] - max(-y1, 0), max(-x0, 0) : u.shape[3] - max(-x1, 0)]


def _convolve(u, kernel):
    """The valid positions of the true 2-D convolution of each plane of u with kernel."""
    c = u.shape[1]
    weight = kernel.to(u.dtype).flip([0, 1])[None, None].expand(c, 1, *kernel.shape)
    return F.conv2d(u, weight, groups=c)


def filtered_lrelu_ref(
    x, filter_up, filter_down, bias=None, up=1, down=1, padding=(0, 0, 0, 0), gain=math.sqrt(2), slope=0.2, clamp=None
):
    """The op (2-D filters as given, padding [x0, x1, y0, y1]) in x's dtype."""
    if bias is not None:
        x = x + bias.to(x.dtype).reshape(1, -1, 1, 1)
    t = _convolve(_zero_insert_and_pad(x, up, list(padding)), filter_up)
    t = torch.where(t < 0, t * slope, t) * gain
    if clamp is not None:
        t = t.clamp(-clamp, clamp)
    return _convolve(t, filter_down)[:, :, ::down, ::down]


def mmcv_filter(f, flip_filter, gain=1.0):
    """The op's 2-D filter (float64) from mmcv's [fh, fw], [taps] or None."""
    if f is None:
        f = torch.ones(1, 1, dtype=torch.float64)
    f = f.double()
    if f.dim() == 1:
        f = f[:, None] * f[None, :]
    if flip_filter:
        f = f.flip([0, 1])
    return f * gain


def mmcv_padding(padding):
    if isinstance(padding, int):
        return [padding] * 4
    padding = list(padding)
    return [padding[0], padding[0], padding[1], padding[1]] if len(padding) == 2 else padding


def filtered_lrelu_mmcv_ref(
    x,
    filter_up=None,
    filter_down=None,
    bias=None,
    up=1,
    down=1,
    padding=0,
    gain=math.sqrt(2),
    slope=0.2,
    clamp=None,
    flip_filter=False,
):
    """mmcv.ops.filtered_lrelu's conventions in float64."""
    fu = mmcv_filter(filter_up, flip_filter, up * up)
    fd = mmcv_filter(filter_down, flip_filter)
    b = None if bias is None else bias.double()
    return filtered_lrelu_ref(x.double(), fu, fd, b, up, down, mmcv_padding(padding), gain, slope, clamp)
