"""Benchmark the 3D box ops of mmdet3d (points_in_boxes, roiaware_pool3d,
roipoint_pool3d) against plain-PyTorch composites written here (torchvision has none,
mmcv's kernels are CUDA-only):

  points_in_boxes_all / _part   B = 16 scans of 16384 points x 64 boxes
  roiaware_pool3d (max, avg)    128 rois, 16384 points, 14 x 14 x 14 voxels,
                                128 points a voxel, C = 16 (PartA2), forward and
                                forward + backward
  roipoint_pool3d               B = 2, 16384 points, 128 boxes, 512 samples,
                                C = 128 (PointRCNN / PV-RCNN)

Two input distributions: "uniform" (points uniform over an 80 m x 80 m x 4 m scene,
boxes anywhere in it: most boxes hold few points) and "objects" (LiDAR-like: the points
lie on and around the boxes, about half of them inside one).

The composites: box-frame coordinates broadcast over every (point, box) pair; the first
points of a box or voxel in index order by a stable sort on (box, voxel) keys;
scatter_reduce (amax / sum) for the pooling, differentiable by autograd. Every row is first
checked against the composite in float64 on the same inputs: the fraction of differing
flags (points within rounding of a face may differ) or the max relative error. The
pooling rows of 16-bit inputs count the fraction of output rows (a voxel's or a sample's
channels) that differ by more than 1e-2: on the coarse 16-bit grid some points sit
exactly on a cell face, where the last bit of the box-frame arithmetic (which differs
between CPU, CUDA and the composite) picks the cell, and one such point moves a max by
its whole value.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err
from box3d_reference import points_near_boxes, random_boxes

import mmops  # noqa: F401  (registers torch.ops.mmops)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}
DISTRIBUTIONS = ["uniform", "objects"]
SCENE = 40.0  # metres from the centre


@dataclass(frozen=True)
class Case:
    name: str
    op: str
    batch: int  # scans (points_in_boxes, roipoint_pool3d); 1 for roiaware_pool3d
    points: int
    boxes: int
    channels: int = 0
    out: int = 0  # voxels a side (roiaware) / samples a box (roipoint)
    cap: int = 128  # max_pts_per_voxel


CUDA_CASES = [
    Case("points_in_boxes_all", "points_in_boxes_all", 16, 16384, 64),
    Case("points_in_boxes_part", "points_in_boxes_part", 16, 16384, 64),
    Case("roiaware_pool3d_max", "roiaware_max", 1, 16384, 128, 16, 14),
    Case("roiaware_pool3d_avg", "roiaware_avg", 1, 16384, 128, 16, 14),
    Case("roipoint_pool3d", "roipoint", 2, 16384, 128, 128, 512),
]
CPU_CASES = [
    Case("points_in_boxes_all", "points_in_boxes_all", 2, 2000, 16),
    Case("points_in_boxes_part", "points_in_boxes_part", 2, 2000, 16),
    Case("roiaware_pool3d_max", "roiaware_max", 1, 2000, 8, 4, 6, 16),
    Case("roiaware_pool3d_avg", "roiaware_avg", 1, 2000, 8, 4, 6, 16),
    Case("roipoint_pool3d", "roipoint", 1, 2000, 8, 8, 32),
]
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}  # 16-bit: 1e-2
FLAG_TOLERANCE = 1e-4  # fraction of flags that may differ (points within rounding of a face)
ROW_TOLERANCE = 1e-3  # 16-bit pooling: fraction of output rows that may differ (points on a cell face)


# ----------------------------------------------------------------------------- inputs


def make_inputs(case: Case, distribution: str, device):
    """(points [B, N, 3], boxes [B, M, 7], features [B, N, C]) in float64 on device."""
    boxes = random_boxes(case.batch, case.boxes, seed=1, extent=SCENE * 0.9)
    g = torch.Generator().manual_seed(2)
    if distribution == "uniform":
        u = torch.rand(case.batch, case.points, 3, generator=g, dtype=torch.float64)
        points = torch.cat([(u[..., :2] * 2 - 1) * SCENE, u[..., 2:] * 4 - 3], -1)
    else:
        points = points_near_boxes(boxes, case.points, seed=3, spread=1.0)
    feats = torch.randn(case.batch, case.points, case.channels, generator=g, dtype=torch.float64)
    return points.to(device), boxes.to(device), feats.to(device)


# ----------------------------------------------------------------------------- composites


def local_frame(points, boxes):
    """points [B, N, 3], boxes [B, M, 7] -> (lx, ly, lz from the bottom, inside), each [B, N, M]."""
    p, b = points.unsqueeze(2), boxes.unsqueeze(1)
    sx, sy = p[..., 0] - b[..., 0], p[..., 1] - b[..., 1]
    c, s = torch.cos(b[..., 6]), torch.sin(b[..., 6])
    lx, ly, lz = sx * c + sy * s, sy * c - sx * s, p[..., 2] - b[..., 2]
    inside = ((lz - b[..., 5] / 2).abs() <= b[..., 5] / 2) & (lx.abs() < b[..., 3] / 2) & (ly.abs() < b[..., 4] / 2)
    return lx, ly, lz, inside


def points_in_boxes_all_composite(points, boxes):
    return local_frame(points, boxes)[3].int()


def points_in_boxes_part_composite(points, boxes):
    inside = local_frame(points, boxes)[3]
    m = inside.shape[-1]
    first = torch.where(inside, torch.arange(m, device=inside.device), m).amin(-1)
    return torch.where(first < m, first, -1).int()


def roiaware_composite(rois, pts, feats, out, cap, mode):
    """rois [K, 7], pts [P, 3], feats [P, C] -> [K, out, out, out, C]."""
    k, c = rois.shape[0], feats.shape[1]
    lx, ly, lz, inside = (t[0].t() for t in local_frame(pts[None], rois[None]))  # [K, P]
    size = rois[:, 3:6, None]
    cells = [((v + off) / (size[:, i] / out)).clamp(0, out - 1).long() for i, (v, off) in
             enumerate(((lx, size[:, 0] / 2), (ly, size[:, 1] / 2), (lz, 0.0)))]  # fmt: skip
    voxel = (cells[0] * out + cells[1]) * out + cells[2]
    roi_idx, point_idx = inside.nonzero(as_tuple=True)  # row-major: point order within a roi
    key = roi_idx * out**3 + voxel[roi_idx, point_idx]
    key, order = torch.sort(key, stable=True)
    point_idx = point_idx[order]
    _, counts = torch.unique_consecutive(key, return_counts=True)
    starts = torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    kept = torch.arange(key.numel(), device=key.device) - starts < cap - 1
    key, point_idx = key[kept], point_idx[kept]
    values = feats[point_idx]
    pooled = feats.new_zeros(k * out**3, c)
    if mode == "max":
        pooled = pooled.scatter_reduce(0, key[:, None].expand(-1, c), values, "amax", include_self=False)
    else:
        total = pooled.index_add(0, key, values)
        n = torch.zeros(k * out**3, device=key.device).index_add_(0, key, torch.ones_like(key, dtype=torch.float))
        pooled = total / n.clamp(min=1)[:, None].to(total.dtype)
    return pooled.reshape(k, out, out, out, c)


def roipoint_composite(points, feats, boxes, samples):
    """-> (pooled [B, M, S, 3 + C], empty flag [B, M])."""
    inside = local_frame(points, boxes)[3].transpose(1, 2)  # [B, M, N]
    count = inside.sum(-1)
    first = torch.sort((~inside).to(torch.uint8), dim=-1, stable=True)[1][..., :samples]  # inside points first
    slots = torch.arange(samples, device=points.device) % count.clamp(min=1, max=first.shape[-1])[..., None]
    idx = torch.gather(first, 2, slots)  # [B, M, S]
    data = torch.cat([points, feats], -1)
    pooled = torch.gather(
        data[:, None].expand(-1, idx.shape[1], -1, -1), 2, idx[..., None].expand(-1, -1, -1, data.shape[-1])
    )
    empty = count == 0
    return torch.where(empty[..., None, None], torch.zeros_like(pooled), pooled), empty.int()


# ----------------------------------------------------------------------------- bench


def differing_rows(out, ref) -> float:
    """The fraction of rows (last dimension) where out and ref differ by > 1e-2 (1 + |ref|)."""
    ref = ref.double()
    far = (out.double() - ref).abs() > 1e-2 * (1 + ref.abs())
    return far.reshape(-1, far.shape[-1]).any(-1).double().mean().item()


def _calls(case: Case, points, boxes, feats):
    """(mmops call, composite call, differentiable feature tensor or None, flags: bool)."""
    ops = torch.ops.mmops
    if case.op.startswith("points_in_boxes"):
        op, composite = getattr(ops, case.op), globals()[case.op + "_composite"]
        return (lambda: op(points, boxes)), (lambda: composite(points, boxes)), None, True
    if case.op == "roipoint":
        return (
            lambda: ops.roipoint_pool3d(points, feats, boxes, case.out)[0],
            lambda: roipoint_composite(points, feats, boxes, case.out)[0],
            None,
            False,
        )
    mode = case.op.removeprefix("roiaware_")
    rois, pts, f = boxes[0], points[0], feats[0].clone().requires_grad_(True)
    size = [case.out] * 3
    return (
        lambda f=f: ops.roiaware_pool3d(rois, pts, f, size, case.cap, mode),
        lambda f=f: roiaware_composite(rois, pts, f, case.out, case.cap, mode),
        f,
        False,
    )


def bench(case: Case, distribution: str, dtype_name: str, run, timer, problems) -> FwdBwdRow:
    dtype = DTYPES[dtype_name]
    shape = f"{case.batch}x{case.points}x{case.boxes}" + (f" C{case.channels} out{case.out}" if case.channels else "")
    row = FwdBwdRow((case.name, shape, distribution, dtype_name))
    p64, b64, f64 = make_inputs(case, distribution, run.device)
    mm, base, leaf, flags = _calls(case, p64.to(dtype), b64.to(dtype), f64.to(dtype))
    try:
        out = mm()
    except Exception as exc:  # report, and go on with the other rows
        row.check = "ERROR"
        problems.append(f"{case.name} {distribution} {dtype_name}: mmops raised {type(exc).__name__}: {exc}")
        return row
    ref = _calls(case, p64.to(dtype).double(), b64.to(dtype).double(), f64.to(dtype).double())[1]()
    if flags:
        err, tol = (out != ref).double().mean().item(), FLAG_TOLERANCE
        row.check = f"differ {err:.1e}"
    elif dtype.itemsize == 2:
        err, tol = differing_rows(out.detach(), ref.detach()), ROW_TOLERANCE
        row.check = f"rows differ {err:.1e}"
    else:
        err, tol = rel_err(out.detach(), ref.detach()), TOLERANCE.get(dtype, 1e-2)
        row.check = f"rel err {err:.1e}"
    if not err <= tol:
        row.check += " !"
        problems.append(f"{case.name} {shape} {distribution} {dtype_name}: error {err:.2e} > {tol}")
    del out, ref
    row.mm_fwd = timer(lambda: mm())
    row.base_fwd = timer(lambda: base())
    if leaf is not None:
        grad = torch.randn_like(mm())

        def fwd_bwd(fn):
            torch.autograd.grad(fn(), leaf, grad)

        row.mm_fb = timer(lambda: fwd_bwd(mm))
        row.base_fb = timer(lambda: fwd_bwd(base))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "box3d benchmark",
        iters=(20, 2),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("distributions", DISTRIBUTIONS, DISTRIBUTIONS, DISTRIBUTIONS),
            ListOption("dtypes", DTYPES, ["fp32", "fp16", "bf16"], ["fp32"]),
        ],
        bench=bench,
        labels=("op", "shape", "distribution", "dtype"),
        baseline="composite",
        check="vs float64 composite",
        with_torchvision=False,
        notes="; flags: fraction differing from the float64 composite",
    )


if __name__ == "__main__":
    sys.exit(main())
