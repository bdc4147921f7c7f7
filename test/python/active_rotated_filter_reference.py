"""float64 reference of mmops::active_rotated_filter in plain torch (mmcv's loop order:
entry l ascending, so the largest l wins a target written twice). Differentiable w.r.t. input."""

import torch


def active_rotated_filter_ref(input, indices):
    op, ip, o, h, w = input.shape
    r = indices.shape[3]
    e = o * h * w
    src = input.double().reshape(op, ip, e)
    idx = indices.reshape(e, r).long() - 1
    out = torch.zeros(op, r, ip, e, dtype=torch.float64)
    for k in range(r):
        for m_l in range(e):
            out[:, k, :, int(idx[m_l, k])] = src[:, :, m_l]  # CopySlices: differentiable
    return out.reshape(op * r, ip * o, h, w)


def orn_indices(orientations, kernel, rotations):
    """An ORN-style table [O, k, k, R]: rotation j turns the k x k grid by j * 360 / R degrees
    (nearest cell, 90-degree multiples exact) and shifts the orientations by j * O / R."""
    import math

    cells = []
    centre = (kernel - 1) / 2
    for j in range(rotations):
        a = 2 * math.pi * j / rotations
        table = torch.empty(orientations, kernel, kernel, dtype=torch.long)
        for oo in range(orientations):
            for y in range(kernel):
                for x in range(kernel):
                    dy, dx = y - centre, x - centre
                    ry = round(centre + dy * math.cos(a) - dx * math.sin(a))
                    rx = round(centre + dy * math.sin(a) + dx * math.cos(a))
                    ry, rx = min(max(ry, 0), kernel - 1), min(max(rx, 0), kernel - 1)
                    ro = (oo + j * orientations // rotations) % orientations
                    table[oo, y, x] = ro * kernel * kernel + ry * kernel + rx + 1
        cells.append(table)
    return torch.stack(cells, -1).to(torch.int32)
