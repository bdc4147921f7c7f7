"""float64 references of tin_shift (tests, property tests, benchmarks/bench_tin_shift.py).

tin_shift_ref: loops over the definition (mmcv's TINShift forward): input [N, T, C, ...],
shift [N, G]; channel c of clip n belongs to group g = c // (C // G) and frame t of the
output holds input frame t - shift[n, g] (positive shifts move data towards later
frames), 0 where that frame is outside [0, T). Differentiable w.r.t. input (slice copies).

tin_shift_grad_ref: the gradient of input for grad_output: grad_output moved by -shift
(frame t holds grad_output frame t + shift[n, g]), the adjoint of the forward.

tin_shift_composite: the forward vectorised (torch.gather along T with a clamped time
index, torch.where for the frames outside): the benchmark's baseline and a check on
larger inputs; any dtype, autograd through gather.
"""

import torch


def _moved(x, shift, sign):
    n_, t_, c_ = x.shape[:3]
    group_channels = c_ // shift.shape[1]
    out = torch.zeros(x.shape, dtype=torch.float64, device=x.device)
    for n in range(n_):
        for c in range(c_):
            s = sign * int(shift[n, c // group_channels])
            for t in range(t_):
                if 0 <= t - s < t_:
                    out[n, t, c] = x[n, t - s, c].double()
    return out


def tin_shift_ref(x, shift):
    """float64 output of tin_shift(x, shift) (loops)."""
    return _moved(x, shift, 1)


def tin_shift_grad_ref(grad_output, shift):
    """float64 gradient of input for grad_output (loops): the data moved by -shift."""
    return _moved(grad_output, shift, -1)


def tin_shift_composite(x, shift):
    """tin_shift as torch.gather along T (vectorised; x's dtype, differentiable)."""
    n, t, c = x.shape[:3]
    rest = (1,) * (x.dim() - 3)
    s = shift.long().clamp(-t, t).repeat_interleave(c // shift.shape[1], dim=1)  # [N, C]
    source = torch.arange(t, device=x.device)[None, :, None] - s[:, None, :]  # [N, T, C]
    inside = ((source >= 0) & (source < t)).view(n, t, c, *rest)
    index = source.clamp(0, max(t - 1, 0)).view(n, t, c, *rest).expand(x.shape)
    return torch.where(inside, torch.gather(x, 1, index), torch.zeros((), dtype=x.dtype, device=x.device))
