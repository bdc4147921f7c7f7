"""float64 references of ca_weight / ca_map and of mmcv 2.x's CrissCrossAttention forward
(tests, test_properties.py and benchmarks/bench_cc_attention.py).

Entry k of the criss-cross of pixel (y, x) (H x W map, L = H + W - 1 entries):
k < W: the pixel (y, k) of its row; k = W + i: the pixel (j, x) of its column with
j = i for i < y, else i + 1 (row y itself is a row entry)."""

import torch
import torch.nn.functional as F


def column_rows(h, device="cpu"):
    """[H - 1, H] int64: [i, y] = the row j of column entry i of a pixel in row y."""
    i = torch.arange(max(h - 1, 0), device=device).view(-1, 1)
    y = torch.arange(h, device=device).view(1, -1)
    return torch.where(i < y, i, i + 1)


def column_index(n, h, w, device="cpu"):
    """column_rows as an index of the [N, H, H, W] table of column products: [N, H - 1, H, W]."""
    return column_rows(h, device).view(1, max(h - 1, 0), h, 1).expand(n, max(h - 1, 0), h, w)


def ca_weight_ref(t, f):
    """Energies [N, L, H, W] (float64, differentiable): einsum over the row and the column,
    the column's H x H products then gathered without j == y."""
    t, f = t.double(), f.double()
    n, _, h, w = t.shape
    if h == 0 or w == 0:
        return (t.sum() + f.sum()) * 0 + t.new_zeros(n, h + w - 1, h, w)
    row = torch.einsum("ncyx,ncys->nsyx", t, f)  # [n, s, y, x]: f at (y, s)
    col = torch.einsum("ncyx,ncjx->njyx", t, f)  # [n, j, y, x]: f at (j, x)
    return torch.cat([row, col.gather(1, column_index(n, h, w, t.device))], 1)


def ca_map_ref(weight, g):
    """Aggregation [N, C, H, W] (float64, differentiable): the column weights scattered into
    an H x H table (zero on j == y), then two einsums."""
    weight, g = weight.double(), g.double()
    n, c, h, w = g.shape
    if h == 0 or w == 0:
        return (weight.sum() + g.sum()) * 0 + g.new_zeros(n, c, h, w)
    row = torch.einsum("nsyx,ncys->ncyx", weight[:, :w], g)
    table = weight.new_zeros(n, h, h, w).scatter(1, column_index(n, h, w, g.device), weight[:, w:])  # [n, j, y, x]
    return row + torch.einsum("njyx,ncjx->ncyx", table, g)


def ca_weight_loops(t, f):
    """The definition as Python loops (small inputs only): an independent check of ca_weight_ref."""
    t, f = t.double(), f.double()
    n, _, h, w = t.shape
    out = torch.zeros(n, h + w - 1, h, w, dtype=torch.float64)
    for y in range(h):
        for x in range(w):
            for k in range(h + w - 1):
                j, s = (y, k) if k < w else ((k - w) if k - w < y else k - w + 1, x)
                out[:, k, y, x] = (t[:, :, y, x] * f[:, :, j, s]).sum(1)
    return out


def ca_map_loops(weight, g):
    """The definition as Python loops (small inputs only): an independent check of ca_map_ref."""
    weight, g = weight.double(), g.double()
    n, c, h, w = g.shape
    out = torch.zeros(n, c, h, w, dtype=torch.float64)
    for y in range(h):
        for x in range(w):
            for k in range(h + w - 1):
                j, s = (y, k) if k < w else ((k - w) if k - w < y else k - w + 1, x)
                out[:, :, y, x] += weight[:, k, y, x].view(n, 1) * g[:, :, j, s]
    return out


def criss_cross_attention_mmcv2(x, params):
    """mmcv 2.x's CrissCrossAttention forward math in float64: energies of the column (the
    pixel itself masked with -inf) and of the row, one softmax over the H + W values, the
    values summed with those weights, gamma * out + x. params: the module's state dict."""
    x = x.double()
    p = {k: v.double() for k, v in params.items()}
    q = F.conv2d(x, p["query_conv.weight"], p["query_conv.bias"])
    k = F.conv2d(x, p["key_conv.weight"], p["key_conv.bias"])
    v = F.conv2d(x, p["value_conv.weight"], p["value_conv.bias"])
    h = x.shape[2]
    mask = torch.diag(torch.full((h,), float("-inf"), dtype=torch.float64, device=x.device))
    e_col = (torch.einsum("ncyx,ncjx->nxyj", q, k) + mask).permute(0, 2, 1, 3)  # [n, y, x, j]
    e_row = torch.einsum("ncyx,ncys->nyxs", q, k)  # [n, y, x, s]
    attn = torch.softmax(torch.cat([e_col, e_row], -1), -1)
    out = torch.einsum("ncjx,nyxj->ncyx", v, attn[..., :h]) + torch.einsum("ncys,nyxs->ncyx", v, attn[..., h:])
    return p["gamma.scale"] * out + x
