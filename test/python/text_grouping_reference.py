"""Plain-Python references of contour_expand and pixel_group (mmcv's sequential
queue), and an emulation of the CUDA kernels' layered flood
(kernels/common/grid_flood_cuda.cuh), shared by the tests and the benchmarks.

Values are Python ints and floats; pixel_group rounds to float32 where mmcv's
float32 kernel does (f32), or not at all for float64 inputs (float32=False)."""

import struct
from collections import deque

# neighbour orders (dy, dx): contour_expand visits row - 1, row + 1, col - 1, col + 1;
# pixel_group col - 1, col + 1, row - 1, row + 1
CONTOUR_EXPAND_DIRS = ((-1, 0), (1, 0), (0, -1), (0, 1))
PIXEL_GROUP_DIRS = ((0, -1), (0, 1), (-1, 0), (1, 0))


def f32(x: float) -> float:
    """x rounded to the nearest float32 (ties to even); inf / nan kept."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


def _plain(t):
    return t.tolist() if hasattr(t, "tolist") else t


def _neighbours(p, height, width, dirs):
    y, x = divmod(p, width)
    for d, (dy, dx) in enumerate(dirs):
        ny, nx = y + dy, x + dx
        if 0 <= ny < height and 0 <= nx < width:
            yield d, ny * width + nx


# ----------------------------------------------------------------------------- contour_expand


def _contour_expand_start(kernel_mask, internal_kernel_label, min_kernel_area):
    masks = [[v for row in plane for v in row] for plane in _plain(kernel_mask)]
    rows = _plain(internal_kernel_label)
    height, width = len(rows), (len(rows[0]) if rows else 0)
    flat = [v for row in rows for v in row]
    area = {}
    for v in flat:
        if v > 0:
            area[v] = area.get(v, 0) + 1
    labels = [v if v > 0 and area[v] >= min_kernel_area else 0 for v in flat]
    seeds = [p for p, v in enumerate(labels) if v > 0]
    return masks, height, width, labels, seeds


def _planes(kernels, progressive):
    return list(range(kernels - 2, -1, -1)) if progressive else ([0] if kernels >= 2 else [])


def _unflatten(labels, height, width):
    return [labels[r * width : (r + 1) * width] for r in range(height)]


def contour_expand_ref(kernel_mask, internal_kernel_label, min_kernel_area, kernel_num=None, progressive=False):
    """The label map (list of rows) of mmcv's queue: seeds = the labels covering >=
    min_kernel_area pixels, raster order; mmcv floods kernel_mask[0] once (K >= 2),
    progressive floods kernel_mask[K-2], ..., [0], each round from the edges of the last."""
    masks, height, width, labels, seeds = _contour_expand_start(kernel_mask, internal_kernel_label, min_kernel_area)
    queue = deque(seeds)
    for k in _planes(len(masks), progressive):
        plane, edges = masks[k], deque()
        while queue:
            p = queue.popleft()
            claimed = False
            for _, q in _neighbours(p, height, width, CONTOUR_EXPAND_DIRS):
                if plane[q] != 0 and labels[q] == 0:
                    labels[q] = labels[p]
                    queue.append(q)
                    claimed = True
            if not claimed:
                edges.append(p)
        queue = edges
    return _unflatten(labels, height, width)


# ----------------------------------------------------------------------------- pixel_group


def _within(kv, e, threshold_square, rnd):
    """mmcv's loop: dis += diff^2 (square and sum in double, rounded by rnd), stop at >= thr^2."""
    dis = 0.0
    for k, v in zip(kv, e):
        diff = rnd(k - v)
        dis = rnd(dis + diff * diff)
        if dis >= threshold_square:
            return False
    return not dis >= threshold_square


def _pixel_group_start(score, mask, embedding, kernel_label, kernel_contour, regions, float32):
    rnd = f32 if float32 else (lambda v: v)
    rows = _plain(kernel_label)
    height, width = len(rows), (len(rows[0]) if rows else 0)
    labels = [v for row in rows for v in row]
    emb = [[rnd(c) for c in px] for row in _plain(embedding) for px in row]
    channels = len(emb[0]) if emb else 0
    sums = [[0.0] * channels for _ in range(regions)]
    area = [0] * regions
    for p, v in enumerate(labels):
        if v > 0:
            sums[v] = [rnd(s + c) for s, c in zip(sums[v], emb[p])]
            area[v] += 1
    kv = [[rnd(s / area[v]) if area[v] else float("nan") for s in sums[v]] for v in range(regions)]
    contour = [v for row in _plain(kernel_contour) for v in row]
    seeds = [p for p, v in enumerate(labels) if v > 0 and contour[p] and channels > 0]
    inside = [bool(v) for row in _plain(mask) for v in row]
    return rnd, height, width, labels, emb, kv, seeds, inside


def _pixel_group_finish(score, labels, regions, rnd):
    scores = [rnd(v) for row in _plain(score) for v in row]
    sums, counts = [0.0] * regions, [0] * regions
    for p, v in enumerate(labels):
        if v > 0:
            sums[v] = rnd(sums[v] + scores[p])
            counts[v] += 1
    means = [rnd(s / c) if c else 0.0 for s, c in zip(sums, counts)]
    return means, counts


def pixel_group_ref(score, mask, embedding, kernel_label, kernel_contour, regions, distance_threshold, float32=True):
    """(labels as rows, mean score per label, count per label) of mmcv's queue."""
    rnd, height, width, labels, emb, kv, seeds, inside = _pixel_group_start(
        score, mask, embedding, kernel_label, kernel_contour, regions, float32
    )
    t = rnd(float(distance_threshold))
    threshold_square = rnd(t * t)
    queue = deque(seeds)
    while queue:
        p = queue.popleft()
        lp = labels[p]
        for _, q in _neighbours(p, height, width, PIXEL_GROUP_DIRS):
            if inside[q] and labels[q] <= 0 and _within(kv[lp], emb[q], threshold_square, rnd):
                labels[q] = lp
                queue.append(q)
    means, counts = _pixel_group_finish(score, labels, regions, rnd)
    return _unflatten(labels, height, width), means, counts


def mmcv_pixel_group_lists(labels, means, counts):
    """mmcv's result from the op's tensors: per label [mean, count, x0, y0, x1, y1, ...]."""
    rows = _plain(labels)
    out = [[float(m), float(c)] for m, c in zip(_plain(means), _plain(counts))]
    for y, row in enumerate(rows):
        for x, v in enumerate(row):
            if v > 0:
                out[v] += [float(x), float(y)]
    return out


# ----------------------------------------------------------------------------- the layered flood


def layered_flood(height, width, labels, seeds, dirs, qualifies, with_edges=False):
    """The CUDA kernels' round: layer by layer, a candidate q (unlabelled, qualifies(p, q))
    goes to the neighbour p of smallest rank in the layer; the new layer in (rank,
    direction) order. Changes labels; returns the edges (pixels that won nothing) in
    pop order when with_edges."""
    layer, edges = list(seeds), []
    while layer:
        claim = {}
        for i, p in enumerate(layer):
            for d, q in _neighbours(p, height, width, dirs):
                if labels[q] == 0 and qualifies(p, q):
                    key = 4 * i + d
                    claim[q] = min(claim.get(q, key), key)
        nxt = []
        for i, p in enumerate(layer):
            won = [q for d, q in _neighbours(p, height, width, dirs) if claim.get(q) == 4 * i + d]
            for q in won:
                labels[q] = labels[p]
            nxt += won
            if with_edges and not won:
                edges.append(p)
        layer = nxt
    return edges


def contour_expand_layered(kernel_mask, internal_kernel_label, min_kernel_area, kernel_num=None, progressive=False):
    masks, height, width, labels, seeds = _contour_expand_start(kernel_mask, internal_kernel_label, min_kernel_area)
    for k in _planes(len(masks), progressive):
        plane = masks[k]
        seeds = layered_flood(
            height, width, labels, seeds, CONTOUR_EXPAND_DIRS, lambda p, q: plane[q] != 0, with_edges=progressive
        )
    return _unflatten(labels, height, width)


def pixel_group_layered(score, mask, embedding, kernel_label, kernel_contour, regions, distance_threshold):
    rnd, height, width, labels, emb, kv, seeds, inside = _pixel_group_start(
        score, mask, embedding, kernel_label, kernel_contour, regions, True
    )
    t = rnd(float(distance_threshold))
    threshold_square = rnd(t * t)
    layered_flood(
        height,
        width,
        labels,
        seeds,
        PIXEL_GROUP_DIRS,
        lambda p, q: inside[q] and _within(kv[labels[p]], emb[q], threshold_square, rnd),
    )
    means, counts = _pixel_group_finish(score, labels, regions, rnd)
    return _unflatten(labels, height, width), means, counts


# ----------------------------------------------------------------------------- synthetic maps


def _instances(height, width, count, generator):
    """count random axis-aligned text boxes (y0, x0, y1, x1), 2..H/3 x 4..W/2 pixels."""
    import torch

    boxes = []
    for _ in range(count):
        h = int(torch.randint(2, max(3, height // 3), (1,), generator=generator))
        w = int(torch.randint(4, max(5, width // 2), (1,), generator=generator))
        y0 = int(torch.randint(0, max(1, height - h), (1,), generator=generator))
        x0 = int(torch.randint(0, max(1, width - w), (1,), generator=generator))
        boxes.append((y0, x0, min(height, y0 + h), min(width, x0 + w)))
    return boxes


def _shrunk(box, ratio):
    y0, x0, y1, x1 = box
    dy, dx = int((y1 - y0) * (1 - ratio) / 2), int((x1 - x0) * (1 - ratio) / 2)
    return y0 + dy, x0 + dx, max(y0 + dy + 1, y1 - dy), max(x0 + dx + 1, x1 - dx)


def synthetic_psenet(height, width, instances, kernels, seed=0, noise=0.02):
    """PSENet-like inputs: (kernel_mask [K, H, W] uint8, label [H, W] int32, kernel_num):
    kernel k of each text box shrunk to 1 - 0.5 k / (K - 1), some pixels flipped; the
    labels: the instance ids on the smallest kernel."""
    import torch

    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(kernels, height, width, dtype=torch.uint8)
    label = torch.zeros(height, width, dtype=torch.int32)
    for i, box in enumerate(_instances(height, width, instances, g)):
        for k in range(kernels):
            y0, x0, y1, x1 = _shrunk(box, 1 - 0.5 * k / max(1, kernels - 1))
            mask[k, y0:y1, x0:x1] = 1
            if k == kernels - 1:
                label[y0:y1, x0:x1] = i + 1
    flip = torch.rand(kernels, height, width, generator=g) < noise
    mask[flip] ^= 1
    return mask, label, instances


def synthetic_pan(height, width, instances, channels=4, seed=0, dtype=None, noise=0.02):
    """PAN-like inputs: (score, mask, embedding, kernel_label, kernel_contour, R): text
    boxes with kernels at half size, one embedding centre per instance plus noise, the
    kernel contour = kernel pixels with a 4-neighbour of another label."""
    import torch

    dtype = dtype or torch.float32
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(height, width, dtype=torch.bool)
    label = torch.zeros(height, width, dtype=torch.int32)
    centre = torch.zeros(height, width, channels)
    for i, box in enumerate(_instances(height, width, instances, g)):
        y0, x0, y1, x1 = box
        mask[y0:y1, x0:x1] = True
        centre[y0:y1, x0:x1] = torch.randn(channels, generator=g) * 2
        ky0, kx0, ky1, kx1 = _shrunk(box, 0.5)
        label[ky0:ky1, kx0:kx1] = i + 1
    mask ^= torch.rand(height, width, generator=g) < noise
    embedding = centre + torch.randn(height, width, channels, generator=g) * 0.3
    score = torch.where(
        mask, 0.5 + 0.5 * torch.rand(height, width, generator=g), torch.rand(height, width, generator=g) * 0.5
    )
    padded = torch.nn.functional.pad(label[None, None].float(), (1, 1, 1, 1), value=-1)[0, 0]
    inner = padded[1:-1, 1:-1]
    differs = (
        (padded[:-2, 1:-1] != inner)
        | (padded[2:, 1:-1] != inner)
        | (padded[1:-1, :-2] != inner)
        | (padded[1:-1, 2:] != inner)
    )
    contour = ((label > 0) & differs).to(torch.uint8)
    return score.to(dtype), mask, embedding.to(dtype), label, contour, instances + 1
