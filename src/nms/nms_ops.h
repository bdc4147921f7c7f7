#pragma once
// Internal pieces of nms, batched_nms, soft_nms and nms_match shared by their
// registration (nms.cpp) and validation (nms_checks.cpp): the checks and the
// dispatcher signatures.

#include "nms/nms_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <tuple>

namespace mmops {

// Signatures of the public schemas, for detail::op_handle (the C++ API).
using NmsFn = at::Tensor(const at::Tensor&, const at::Tensor&, double);
using BatchedNmsFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double);
using SoftNmsFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, double, double, double,
                                                     c10::string_view);
using NmsMatchFn = at::Tensor(const at::Tensor&, double);

namespace detail {

// Every argument of a call; works on real and fake tensors (no data access).
// The device entries run them, and so do the validation-only schemas
// (_nms_check, ...) that the Python fake kernels call: fake tensors raise the
// errors of eager mode.
void check_nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

// idxs: the category of every box, any integer dtype. Its values are labels,
// compared with each other but never used as addresses: no index policy.
void check_batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs, double iou_threshold);

SoftNmsParams check_soft_nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold, double sigma,
                             double min_score, c10::string_view method);

// dets: [N, 5] (x1, y1, x2, y2, score), one floating dtype.
void check_nms_match(const at::Tensor& dets, double iou_threshold);

} // namespace detail
} // namespace mmops
