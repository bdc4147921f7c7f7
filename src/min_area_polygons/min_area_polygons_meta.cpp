// Meta (shape and dtype only) kernel of min_area_polygons. Sizes stay symbolic.

#include "min_area_polygons/min_area_polygons_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor min_area_polygons_meta(const at::Tensor& pointsets) {
  detail::check_min_area_polygons(pointsets);
  return at::empty_symint({pointsets.sym_size(0), 8}, pointsets.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("min_area_polygons", &mmops::min_area_polygons_meta);
}
