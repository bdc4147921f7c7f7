#pragma once
// Internal to points_in_polygons: the validation (points_in_polygons_checks.cpp)
// shared by the device entries and the meta kernel, and the dispatcher
// signature of the schema.

#include "points_in_polygons/points_in_polygons_kernels.h"

#include <ATen/core/Tensor.h>

namespace mmops {

constexpr const char* kPointsInPolygonsOp = "mmops::points_in_polygons: ";

namespace detail {

// points [N, 2], polygons [M, 8], one floating dtype and device; works on
// fake tensors (no data access).
void check_points_in_polygons(const at::Tensor& points, const at::Tensor& polygons);

} // namespace detail

// points_in_polygons(Tensor points, Tensor polygons) -> Tensor
using PointsInPolygonsFn = at::Tensor(const at::Tensor&, const at::Tensor&);

} // namespace mmops
