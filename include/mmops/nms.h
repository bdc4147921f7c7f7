#pragma once
// Public C++ API of mmops::nms, batched_nms, soft_nms and nms_match. Calls go through the
// PyTorch dispatcher, like torch.ops.mmops.* from Python.
//
// Boxes are [N, 4] (x1, y1, x2, y2), float/double/half/bfloat16; scores [N],
// any floating dtype, same device. Order: decreasing score, ties to the lower
// index, a NaN score after every number. A box with a NaN/Inf coordinate has
// IoU 0 with every box. Not differentiable.

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <tuple>

namespace mmops {

// Greedy non-maximum suppression: the indices (int64) of the kept boxes, by
// decreasing score. A box is suppressed by a kept box of higher rank whose IoU
// with it is > iou_threshold.
at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

// nms inside each category of idxs ([N], integer) only; the kept indices of all
// categories by decreasing score.
at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs, double iou_threshold);

// mmcv soft-NMS. method: "naive" (score 0 when IoU >= iou_threshold), "linear"
// (score * (1 - IoU) when IoU >= iou_threshold) or "gaussian" (score *
// exp(-IoU^2 / sigma)). Returns (dets [K, 5] = (x1, y1, x2, y2, score) in
// selection order, keep [K] int64 input indices).
std::tuple<at::Tensor, at::Tensor> soft_nms(const at::Tensor& boxes, const at::Tensor& scores,
                                            double iou_threshold = 0.3, double sigma = 0.5, double min_score = 1e-3,
                                            c10::string_view method = "linear");

// mmcv's nms_match: the groups that greedy NMS forms, with IoU >= iou_threshold
// (not >). dets: [N, 5] (x1, y1, x2, y2, score). Returns [N, 2] int64 rows
// (leader, member), one per box: the groups by decreasing leader score, each
// group's leader row (leader, leader) first, then its members by decreasing
// score. A box joins the group of the first leader that reaches it.
at::Tensor nms_match(const at::Tensor& dets, double iou_threshold);

} // namespace mmops
