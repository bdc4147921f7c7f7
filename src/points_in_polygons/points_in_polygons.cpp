// mmops::points_in_polygons: schema, device entries (CPU/CUDA registration)
// and the public C++ API. Validation in points_in_polygons_checks.cpp,
// kernels in kernels/points_in_polygons, meta in points_in_polygons_meta.cpp.

#include "points_in_polygons/points_in_polygons_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/points_in_polygons.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  mmops::detail::define_op(m, "points_in_polygons(Tensor points, Tensor polygons) -> Tensor");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor points_in_polygons_entry(const at::Tensor& points, const at::Tensor& polygons) {
  detail::check_points_in_polygons(points, polygons);
  return Kernel(points, polygons);
}

} // namespace

at::Tensor points_in_polygons(const at::Tensor& points, const at::Tensor& polygons) {
  static const auto op = detail::op_handle<PointsInPolygonsFn>("mmops::points_in_polygons");
  return op.call(points, polygons);
}

} // namespace mmops

#define MMOPS_POINTS_IN_POLYGONS_ENTRIES(m, device) \
  m.impl("points_in_polygons", &points_in_polygons_entry<kernels::points_in_polygons_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_POINTS_IN_POLYGONS_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "points_in_polygons")
