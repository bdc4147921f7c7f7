"""nms, batched_nms, soft_nms and nms_match: mmcv-style functional wrappers
around torch.ops.mmops (the fake kernels of the first three: mmops/_fake.py).

The ops themselves (what TorchScript, torch.compile and C++ see):
    torch.ops.mmops.nms(boxes, scores, iou_threshold) -> keep
    torch.ops.mmops.batched_nms(boxes, scores, idxs, iou_threshold) -> keep
    torch.ops.mmops.soft_nms(boxes, scores, iou_threshold=0.3, sigma=0.5,
                             min_score=1e-3, method="linear") -> (dets, keep)
    torch.ops.mmops.nms_match(dets, iou_threshold) -> rows [N, 2] (leader, member)
keep: int64 indices into the input, by decreasing score (ties: lower index
first; a NaN score after every number). The wrappers below add mmcv's
conveniences (dets, offset, score_threshold, max_num, nms_cfg).
"""

from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor

__all__ = ["nms", "batched_nms", "soft_nms", "nms_match"]


def _shift_for_offset(boxes: Tensor, offset: int) -> Tensor:
    """IoU with mmcv's legacy offset 1 (w = x2 - x1 + 1) equals IoU with offset 0
    of the boxes whose x2 and y2 are one larger."""
    if offset == 0:
        return boxes
    if offset != 1:
        raise ValueError(f"mmops: offset must be 0 or 1, got {offset}")
    return boxes + torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=boxes.dtype, device=boxes.device)


def nms(
    boxes: Tensor,
    scores: Tensor,
    iou_threshold: float,
    offset: int = 0,
    score_threshold: float = 0.0,
    max_num: int = -1,
) -> Tuple[Tensor, Tensor]:
    """mmcv.ops.nms: returns (dets [K, 5] = (x1, y1, x2, y2, score), inds [K]).

    Boxes with score <= score_threshold are dropped first (when it is > 0);
    at most max_num boxes are returned (when it is > 0). The kept boxes come
    by decreasing score. The op alone: torch.ops.mmops.nms(boxes, scores, thr).
    """
    valid_inds: Optional[Tensor] = None
    nms_boxes, nms_scores = boxes, scores
    if score_threshold > 0:
        valid_mask = scores > score_threshold
        nms_boxes, nms_scores = boxes[valid_mask], scores[valid_mask]
        valid_inds = torch.nonzero(valid_mask).squeeze(1)
    inds = torch.ops.mmops.nms(_shift_for_offset(nms_boxes, offset), nms_scores, float(iou_threshold))
    if max_num > 0:
        inds = inds[:max_num]
    if valid_inds is not None:
        inds = valid_inds[inds]
    dets = torch.cat((boxes[inds], scores[inds].reshape(-1, 1).to(boxes.dtype)), dim=1)
    return dets, inds


def soft_nms(
    boxes: Tensor,
    scores: Tensor,
    iou_threshold: float = 0.3,
    sigma: float = 0.5,
    min_score: float = 1e-3,
    method: str = "linear",
    offset: int = 0,
) -> Tuple[Tensor, Tensor]:
    """mmcv.ops.soft_nms: returns (dets [K, 5] with the decayed scores, inds [K]) in
    selection order; runs on the boxes' device (mmcv: CPU only)."""
    dets, inds = torch.ops.mmops.soft_nms(
        _shift_for_offset(boxes, offset), scores, float(iou_threshold), float(sigma), float(min_score), method
    )
    if offset != 0:
        dets = torch.cat((boxes[inds], dets[:, 4:]), dim=1)
    return dets, inds


def batched_nms(
    boxes: Tensor, scores: Tensor, idxs: Tensor, nms_cfg: Optional[Dict[str, Any]], class_agnostic: bool = False
) -> Tuple[Tensor, Tensor]:
    """mmcv.ops.batched_nms: NMS inside each category of ``idxs`` only.

    nms_cfg: ``type`` ("nms", "soft_nms", "nms_rotated" for [N, 5] rotated boxes
    or "nms_quadri" for [N, 8] quadrilaterals; default "nms"), ``iou_threshold``
    (or the old ``iou_thr``), ``class_agnostic``, ``max_num``, and the other
    arguments of :func:`nms` / :func:`soft_nms`; ``split_thr`` is accepted and
    ignored (mmops needs no per-class loop). None: no NMS, every box sorted by
    score. Returns (dets [K, 5], keep [K]) by decreasing score.
    """
    if nms_cfg is None:
        order = torch.sort(scores, descending=True, stable=True)[1]
        return torch.cat([boxes[order], scores[order, None].to(boxes.dtype)], -1), order
    cfg = dict(nms_cfg)
    class_agnostic = bool(cfg.pop("class_agnostic", class_agnostic))
    nms_type = cfg.pop("type", "nms")
    cfg.pop("split_thr", None)
    if "iou_thr" in cfg:
        cfg["iou_threshold"] = cfg.pop("iou_thr")
    max_num = int(cfg.pop("max_num", -1))
    if nms_type == "nms":
        iou_threshold = float(cfg.pop("iou_threshold"))
        offset = int(cfg.pop("offset", 0))
        score_threshold = float(cfg.pop("score_threshold", 0.0))
        if cfg:
            raise ValueError(f"mmops.batched_nms: unknown nms_cfg keys {sorted(cfg)}")
        sel = torch.arange(boxes.size(0), device=boxes.device)
        if score_threshold > 0:
            sel = torch.nonzero(scores > score_threshold).squeeze(1)
        b = _shift_for_offset(boxes[sel], offset)
        if class_agnostic:
            keep = torch.ops.mmops.nms(b, scores[sel], iou_threshold)
        else:
            keep = torch.ops.mmops.batched_nms(b, scores[sel], idxs[sel], iou_threshold)
        keep = sel[keep]
        if max_num > 0:
            keep = keep[:max_num]
        return torch.cat([boxes[keep], scores[keep, None].to(boxes.dtype)], -1), keep
    if nms_type == "soft_nms":
        # Scores change, so categories run one by one; then merge by decayed score.
        if class_agnostic:
            dets, keep = soft_nms(boxes, scores, **cfg)
        else:
            all_dets, all_keep = [], []
            for category in torch.unique(idxs):
                members = torch.nonzero(idxs == category).squeeze(1)
                d, k = soft_nms(boxes[members], scores[members], **cfg)
                all_dets.append(d)
                all_keep.append(members[k])
            if all_dets:
                dets, keep = torch.cat(all_dets), torch.cat(all_keep)
            else:
                dets, keep = boxes.new_empty((0, 5)), idxs.new_empty((0,), dtype=torch.long)
            order = torch.sort(dets[:, 4], descending=True, stable=True)[1]
            dets, keep = dets[order], keep[order]
        if max_num > 0:
            dets, keep = dets[:max_num], keep[:max_num]
        return dets, keep
    if nms_type in ("nms_rotated", "nms_quadri"):
        from mmops.nms_rotated import _rotated_batched_nms

        return _rotated_batched_nms(nms_type, boxes, scores, idxs, cfg, class_agnostic, max_num)
    raise ValueError(
        f"mmops.batched_nms: nms_cfg type must be 'nms', 'soft_nms', 'nms_rotated' or 'nms_quadri', got {nms_type!r}"
    )


def nms_match(dets: Any, iou_threshold: float) -> List[Any]:
    """mmcv.ops.nms_match: the groups greedy NMS forms on dets [N, 5] (x1, y1, x2,
    y2, score), a box joining the group of the first higher-ranked kept box whose
    IoU with it is >= iou_threshold.

    Returns one int64 index tensor (numpy input: one numpy int array) per kept box,
    by decreasing score: the kept box first, then the boxes it took, by decreasing
    score. Tensors stay on dets' device; splitting the op's rows into groups reads
    the group sizes on the host (one synchronisation on CUDA).
    """
    if dets.shape[0] == 0:
        return []  # mmcv returns before checking the shape
    is_tensor = isinstance(dets, Tensor)
    rows = torch.ops.mmops.nms_match(dets if is_tensor else torch.from_numpy(dets), float(iou_threshold))
    members = rows[:, 1].contiguous()
    counts = torch.unique_consecutive(rows[:, 0], return_counts=True)[1].tolist()
    groups = torch.split(members, counts)
    if is_tensor:
        return list(groups)
    import numpy as np

    return [np.array(g.numpy(), dtype=int) for g in groups]
