#pragma once
// Internal pieces of box_iou_rotated and box_iou_quadri shared by their
// registration, meta and validation files.

#include "box_iou_rotated/box_iou_rotated_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

namespace mmops {

// Signatures of the schemas, for detail::op_handle (the C++ API).
using BoxIouRotatedFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, bool, bool);
using BoxIouQuadriFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, bool);

namespace detail {

// Every argument of a call; works on real and fake tensors (no data access).
BoxIouRotatedParams check_box_iou_rotated(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode,
                                          bool aligned, bool clockwise);
BoxIouRotatedParams check_box_iou_quadri(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode,
                                         bool aligned);

} // namespace detail
} // namespace mmops
