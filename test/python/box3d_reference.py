"""float64 references of the 3D box ops (points_in_boxes_*, roiaware_pool3d,
roipoint_pool3d) in plain torch / Python, written from mmcv's documented rules,
and input generators shared by their tests. No pytest."""

import math

import torch


def local_coords(points, boxes):
    """points [..., N, 3], boxes [..., M, 7] -> (lx, ly, lz_centre, inside) each [..., N, M] in float64:
    the point in each box's frame (lz from the box's centre height) and mmcv's inside rule
    (strict in x / y, inclusive in z; a non-finite value anywhere: outside)."""
    p = points.double().unsqueeze(-2)  # [..., N, 1, 3]
    b = boxes.double().unsqueeze(-3)  # [..., 1, M, 7]
    sx, sy = p[..., 0] - b[..., 0], p[..., 1] - b[..., 1]
    c, s = torch.cos(b[..., 6]), torch.sin(b[..., 6])
    lx = sx * c + sy * s
    ly = -sx * s + sy * c
    lz = p[..., 2] - (b[..., 2] + b[..., 5] / 2)
    inside = (lz.abs() <= b[..., 5] / 2) & (lx.abs() < b[..., 3] / 2) & (ly.abs() < b[..., 4] / 2)
    finite = torch.isfinite(p).all(-1) & torch.isfinite(b).all(-1)
    return lx, ly, lz, inside & finite


def boundary_margin(points, boxes):
    """[..., N, M]: how far (float64) each point is from the nearest face of each box."""
    lx, ly, lz, _ = local_coords(points, boxes)
    b = boxes.double().unsqueeze(-3)
    return torch.stack([b[..., 3] / 2 - lx.abs(), b[..., 4] / 2 - ly.abs(), b[..., 5] / 2 - lz.abs()]).abs().amin(0)


def points_in_boxes_all_reference(points, boxes):
    return local_coords(points, boxes)[3].int()


def points_in_boxes_part_reference(points, boxes):
    inside = local_coords(points, boxes)[3]
    m = inside.shape[-1]
    first = torch.where(inside, torch.arange(m), m).amin(-1) if m else torch.full(inside.shape[:-1], m)
    return torch.where(first < m, first, -1).int()


def random_boxes(batch, m, *, seed=0, extent=20.0, dtype=torch.float64):
    """[batch, m, 7] LiDAR boxes: centres in [-extent, extent]^2, bottoms in [-2, 1], sizes in [1, 6]."""
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(batch, m, 7, generator=g, dtype=torch.float64)
    boxes = torch.cat(
        [(u[..., :2] * 2 - 1) * extent, u[..., 2:3] * 3 - 2, u[..., 3:6] * 5 + 1, (u[..., 6:] * 2 - 1) * math.pi], -1
    )
    return boxes.to(dtype)


def points_near_boxes(boxes, n, *, seed=0, spread=0.8, dtype=torch.float64):
    """[batch, n, 3]: points around the boxes (box-local offsets up to `spread` of each half
    size beyond 1, so about half land inside), in the boxes' batches."""
    g = torch.Generator().manual_seed(seed)
    batch, m, _ = boxes.shape
    b = boxes.double()
    which = torch.randint(0, max(m, 1), (batch, n), generator=g)
    u = (torch.rand(batch, n, 3, generator=g, dtype=torch.float64) * 2 - 1) * (1 + spread)
    if m == 0:
        return (u * 10).to(dtype)
    sel = torch.gather(b, 1, which.unsqueeze(-1).expand(batch, n, 7))
    lx, ly = u[..., 0] * sel[..., 3] / 2, u[..., 1] * sel[..., 4] / 2
    c, s = torch.cos(sel[..., 6]), torch.sin(sel[..., 6])
    x = sel[..., 0] + lx * c - ly * s
    y = sel[..., 1] + lx * s + ly * c
    z = sel[..., 2] + sel[..., 5] / 2 + u[..., 2] * sel[..., 5] / 2
    return torch.stack([x, y, z], -1).to(dtype)


def roipoint_pool3d_reference(points, point_features, boxes3d, num_sampled_points):
    """mmcv's rule: the first num_sampled_points points (index order) inside each box; fewer:
    slot k repeats point k % count; none: zeros and empty flag 1."""
    batch, n, _ = points.shape
    m, c = boxes3d.shape[1], point_features.shape[2]
    inside = local_coords(points, boxes3d)[3]  # [B, N, M]
    out = torch.zeros(batch, m, num_sampled_points, 3 + c, dtype=torch.float64)
    empty = torch.zeros(batch, m, dtype=torch.int32)
    data = torch.cat([points.double(), point_features.double()], -1)
    for b in range(batch):
        for j in range(m):
            idx = inside[b, :, j].nonzero().flatten()[:num_sampled_points]
            if idx.numel() == 0:
                empty[b, j] = 1
                continue
            slots = idx[torch.arange(num_sampled_points) % idx.numel()]
            out[b, j] = data[b, slots]
    return out, empty


def roiaware_voxels(rois, pts, out_size, max_pts_per_voxel):
    """For each roi: a dict voxel (ix, iy, iz) -> the kept point indices in index order (at most
    max_pts_per_voxel - 1, mmcv's rule), voxel index floor(offset / (size / out)) clamped."""
    lx, ly, _, inside = local_coords(pts, rois)  # [P, N]
    r = rois.double()
    lz = pts.double()[:, 2:3] - r[:, 2]
    result = []
    for k in range(rois.shape[0]):
        voxels = {}
        for p in inside[:, k].nonzero().flatten().tolist():
            offsets = (lx[p, k] + r[k, 3] / 2, ly[p, k] + r[k, 4] / 2, lz[p, k])
            idx = []
            for axis, offset in enumerate(offsets):
                res = r[k, 3 + axis] / out_size[axis]
                v = (offset / res).item() if res > 0 else 0.0
                idx.append(min(max(int(v) if v == v else 0, 0), out_size[axis] - 1))
            kept = voxels.setdefault(tuple(idx), [])
            if len(kept) < max_pts_per_voxel - 1:
                kept.append(p)
        result.append(voxels)
    return result


def roiaware_pool3d_reference(rois, pts, pts_feature, out_size, max_pts_per_voxel, mode):
    """[N, out_x, out_y, out_z, C] float64: max (first maximum wins, NaN wins and sticks) or mean
    of the kept points' features per voxel; 0 for an empty voxel."""
    c = pts_feature.shape[1]
    out = torch.zeros(rois.shape[0], *out_size, c, dtype=torch.float64)
    feats = pts_feature.double()
    for k, voxels in enumerate(roiaware_voxels(rois, pts, out_size, max_pts_per_voxel)):
        for v, kept in voxels.items():
            f = feats[kept]
            if mode == "avg":
                out[(k, *v)] = f.mean(0)
                continue
            for ch in range(c):
                best = f[0, ch]
                for value in f[1:, ch]:
                    if value > best or (value != value and best == best):
                        best = value
                out[(k, *v, ch)] = best
    return out
