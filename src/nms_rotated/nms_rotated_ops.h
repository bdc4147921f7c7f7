#pragma once
// Internal pieces of nms_rotated and nms_quadri shared by their registration
// and validation files.

#include "nms_rotated/nms_rotated_kernels.h"

#include <ATen/core/Tensor.h>

#include <optional>

namespace mmops {

// Signatures of the public schemas, for detail::op_handle (the C++ API).
using NmsRotatedFn = at::Tensor(const at::Tensor&, const at::Tensor&, double, const std::optional<at::Tensor>&, bool);
using NmsQuadriFn = at::Tensor(const at::Tensor&, const at::Tensor&, double, const std::optional<at::Tensor>&);

namespace detail {

// Every argument of a call; works on real and fake tensors (no data access).
// The device entries run them, and so do the validation-only schemas that the
// Python fake kernels call. labels are compared, never used as addresses: no
// index policy.
NmsRotatedParams check_nms_rotated(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                                   const std::optional<at::Tensor>& labels, bool clockwise);
NmsRotatedParams check_nms_quadri(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                                  const std::optional<at::Tensor>& labels);

} // namespace detail
} // namespace mmops
