// mmops::min_area_polygons: schema, device entries (CPU/CUDA registration) and
// the public C++ API. Validation in min_area_polygons_checks.cpp, kernels in
// kernels/min_area_polygons, meta in min_area_polygons_meta.cpp.

#include "min_area_polygons/min_area_polygons_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/min_area_polygons.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  mmops::detail::define_op(m, "min_area_polygons(Tensor pointsets) -> Tensor");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor min_area_polygons_entry(const at::Tensor& pointsets) {
  detail::check_min_area_polygons(pointsets);
  return Kernel(pointsets);
}

} // namespace

at::Tensor min_area_polygons(const at::Tensor& pointsets) {
  static const auto op = detail::op_handle<MinAreaPolygonsFn>("mmops::min_area_polygons");
  return op.call(pointsets);
}

} // namespace mmops

#define MMOPS_MIN_AREA_POLYGONS_ENTRIES(m, device) \
  m.impl("min_area_polygons", &min_area_polygons_entry<kernels::min_area_polygons_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_MIN_AREA_POLYGONS_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "min_area_polygons")
