#pragma once
// Internal to min_area_polygons: the validation (min_area_polygons_checks.cpp)
// shared by the device entries and the meta kernel, and the dispatcher
// signature of the schema.

#include "min_area_polygons/min_area_polygons_kernels.h"

#include <ATen/core/Tensor.h>

namespace mmops {

constexpr const char* kMinAreaPolygonsOp = "mmops::min_area_polygons: ";

namespace detail {

// pointsets: [N, 18] floating; works on fake tensors (no data access).
void check_min_area_polygons(const at::Tensor& pointsets);

} // namespace detail

// min_area_polygons(Tensor pointsets) -> Tensor
using MinAreaPolygonsFn = at::Tensor(const at::Tensor&);

} // namespace mmops
