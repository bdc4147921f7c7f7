// Meta (shape and dtype only) kernel of points_in_polygons. Sizes stay symbolic.

#include "points_in_polygons/points_in_polygons_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor points_in_polygons_meta(const at::Tensor& points, const at::Tensor& polygons) {
  detail::check_points_in_polygons(points, polygons);
  return at::empty_symint({points.sym_size(0), polygons.sym_size(0)}, points.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("points_in_polygons", &mmops::points_in_polygons_meta);
}
