"""float64 loop reference of psa_mask (tests and benchmarks/bench_psa_mask.py)."""

import torch


def psa_mask_ref(x, psa_type, mask_size):
    """float64 loops over the definition: mask entry (i, j) of pixel (h, w) belongs
    to pixel (y, x) = (h + i - (mask_h - 1) // 2, w + j - (mask_w - 1) // 2)."""
    n_, _, height, width = x.shape
    mh, mw = mask_size
    xd = x.double()
    out = torch.zeros(n_, height * width, height, width, dtype=torch.float64)
    for h in range(height):
        for w in range(width):
            for i in range(mh):
                for j in range(mw):
                    y, x_ = h + i - (mh - 1) // 2, w + j - (mw - 1) // 2
                    if 0 <= y < height and 0 <= x_ < width:
                        value = xd[:, i * mw + j, h, w]
                        if psa_type == "collect":
                            out[:, y * width + x_, h, w] = value
                        else:
                            out[:, h * width + w, y, x_] = value
    return out
