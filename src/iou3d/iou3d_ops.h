#pragma once
// Internal pieces of the iou3d family (boxes_overlap_bev, boxes_iou_bev,
// nms_bev, nms_normal_bev) shared by its registration, meta and validation
// files.

#include "iou3d/iou3d_kernels.h"

#include <ATen/core/Tensor.h>

#include <optional>

namespace mmops {

// Signatures of the public schemas, for detail::op_handle (the C++ API).
using BoxesOverlapBevFn = at::Tensor(const at::Tensor&, const at::Tensor&);
using NmsBevFn = at::Tensor(const at::Tensor&, const at::Tensor&, double, std::optional<int64_t>,
                            std::optional<int64_t>);
using NmsNormalBevFn = at::Tensor(const at::Tensor&, const at::Tensor&, double);

namespace detail {

// Every argument of a call; works on real and fake tensors (no data access).
BevOverlapParams check_boxes_overlap_bev(const at::Tensor& boxes_a, const at::Tensor& boxes_b);
BevOverlapParams check_boxes_iou_bev(const at::Tensor& boxes_a, const at::Tensor& boxes_b);
NmsBevParams check_nms_bev(const at::Tensor& boxes, const at::Tensor& scores, double thresh,
                           std::optional<int64_t> pre_max_size, std::optional<int64_t> post_max_size);
NmsBevParams check_nms_normal_bev(const at::Tensor& boxes, const at::Tensor& scores, double thresh);

} // namespace detail
} // namespace mmops
