#pragma once
// Internal to points_in_boxes: the validation (points_in_boxes_checks.cpp)
// shared by the device entries and the meta kernels, and the dispatcher
// signature of the schemas.

#include "points_in_boxes/points_in_boxes_kernels.h"

#include <ATen/core/Tensor.h>

namespace mmops {

constexpr const char* kPointsInBoxesPartOp = "mmops::points_in_boxes_part: ";
constexpr const char* kPointsInBoxesAllOp = "mmops::points_in_boxes_all: ";

namespace detail {

// points [B, N, 3], boxes [B, M, 7], one floating dtype and device, M < 2^31
// (box indices are int32), B * N * M within int64. `op` is the error prefix
// ("mmops::points_in_boxes_part: "). Works on fake tensors (no data access).
void check_points_in_boxes(const char* op, const at::Tensor& points, const at::Tensor& boxes);

} // namespace detail

// points_in_boxes_part(Tensor points, Tensor boxes) -> Tensor
// points_in_boxes_all(Tensor points, Tensor boxes) -> Tensor
using PointsInBoxesFn = at::Tensor(const at::Tensor&, const at::Tensor&);

} // namespace mmops
