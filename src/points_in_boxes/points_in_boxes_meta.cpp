// Meta (shape and dtype only) kernels of points_in_boxes_part / _all. Sizes stay symbolic.

#include "points_in_boxes/points_in_boxes_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor points_in_boxes_part_meta(const at::Tensor& points, const at::Tensor& boxes) {
  detail::check_points_in_boxes(kPointsInBoxesPartOp, points, boxes);
  return at::empty_symint({points.sym_size(0), points.sym_size(1)}, points.options().dtype(at::kInt));
}

at::Tensor points_in_boxes_all_meta(const at::Tensor& points, const at::Tensor& boxes) {
  detail::check_points_in_boxes(kPointsInBoxesAllOp, points, boxes);
  return at::empty_symint({points.sym_size(0), points.sym_size(1), boxes.sym_size(1)},
                          points.options().dtype(at::kInt));
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("points_in_boxes_part", &mmops::points_in_boxes_part_meta);
  m.impl("points_in_boxes_all", &mmops::points_in_boxes_all_meta);
}
