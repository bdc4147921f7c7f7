"""float64 reference of corner_pool from the definition (tests and benchmarks/bench_corner_pool.py):
for every output position, the window of positions it pools and the position that attains the
maximum (the nearest one on ties; with a NaN in the window, the nearest NaN)."""

import torch

# mode -> (pooled dim of [N, C, H, W], whether the window runs towards larger indices)
MODES = {"top": (2, True), "bottom": (2, False), "left": (3, True), "right": (3, False)}


def corner_pool_argmax(x, mode):
    """The position (along the pooled axis) whose value each output takes: int64, x's shape."""
    dim, towards_end = MODES[mode]
    xt = x.double().movedim(dim, -1)  # [..., L]
    length = xt.shape[-1]
    arg = torch.empty(xt.shape, dtype=torch.int64)
    for k in range(length):
        # the window, nearest position first
        window = torch.arange(k, length) if towards_end else torch.arange(k, -1, -1)
        vals = xt[..., window]
        nan = vals.isnan()
        best = torch.where(nan, torch.full_like(vals, -torch.inf), vals).amax(-1, keepdim=True)
        first_max = (vals == best).int().argmax(-1)  # argmax returns the first of equal values
        first_nan = nan.int().argmax(-1)
        arg[..., k] = window[torch.where(nan.any(-1), first_nan, first_max)]
    return arg.movedim(-1, dim)


def corner_pool_ref(x, mode):
    """The output in float64."""
    dim, _ = MODES[mode]
    return torch.take_along_dim(x.double(), corner_pool_argmax(x, mode), dim)


def corner_pool_grad_ref(x, mode, grad_output):
    """The gradient w.r.t. x in float64: each output's gradient added to its argmax."""
    dim, _ = MODES[mode]
    grad = torch.zeros(x.shape, dtype=torch.float64)
    return grad.scatter_add_(dim, corner_pool_argmax(x, mode), grad_output.double())


def corner_pool_composite(x, mode):
    """mmcv 2.x's CornerPool.forward: torch.cummax, on the flipped tensor for top / left."""
    dim, flip = MODES[mode]
    if flip:
        x = x.flip(dim)
    out, _ = torch.cummax(x, dim)
    return out.flip(dim) if flip else out
