#pragma once
// Device kernels of nms, batched_nms, soft_nms and nms_match. Callers (src/nms) validate
// the arguments first; these functions only compute.
//
// Order used everywhere: decreasing score, a NaN score after every number, ties
// to the lower index (score_order below).

#include "nms/nms_math.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

struct SoftNmsParams {
  double iou_threshold;
  double sigma;
  double min_score;
  SoftNmsMethod method;
};

namespace kernels {

// Indices [N] int64 that sort `scores` by decreasing value, NaN last, ties to
// the lower index (a stable sort on an order-preserving integer key; any device).
at::Tensor score_order(const at::Tensor& scores);

// Position order for batched_nms: by category ascending, then score_order
// within a category. Returns (perm [N] int64, order [N] int64 = score_order).
std::tuple<at::Tensor, at::Tensor> category_score_order(const at::Tensor& scores, const at::Tensor& idxs);

// Kept indices, int64, by decreasing score (ties: lower index first).
// idxs: undefined for plain nms, else the [N] int64 categories.
at::Tensor nms_cpu(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs, double iou_threshold);

// (dets [K, 5], keep [K] int64) in selection order.
std::tuple<at::Tensor, at::Tensor> soft_nms_cpu(const at::Tensor& boxes, const at::Tensor& scores,
                                                const SoftNmsParams& params);

// nms_match: [N, 2] int64 rows (leader, member), see src/nms/nms.cpp. A box
// joins the group of the first leader (in score order) with IoU >= threshold,
// the IoU compared in the compute type (mmcv compares floats).
at::Tensor nms_match_cpu(const at::Tensor& dets, double iou_threshold);

#ifdef MMOPS_WITH_CUDA
at::Tensor nms_cuda(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs, double iou_threshold);

std::tuple<at::Tensor, at::Tensor> soft_nms_cuda(const at::Tensor& boxes, const at::Tensor& scores,
                                                 const SoftNmsParams& params);

at::Tensor nms_match_cuda(const at::Tensor& dets, double iou_threshold);
#endif

} // namespace kernels
} // namespace mmops
