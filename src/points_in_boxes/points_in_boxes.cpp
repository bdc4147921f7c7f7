// mmops::points_in_boxes_part / points_in_boxes_all: schemas, device entries
// (CPU/CUDA registration) and the public C++ API. Validation in
// points_in_boxes_checks.cpp, kernels in kernels/points_in_boxes, meta in
// points_in_boxes_meta.cpp.

#include "points_in_boxes/points_in_boxes_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/points_in_boxes.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "points_in_boxes_part(Tensor points, Tensor boxes) -> Tensor");
  define_op(m, "points_in_boxes_all(Tensor points, Tensor boxes) -> Tensor");
}

namespace mmops {
namespace {

// kPart: points_in_boxes_part, else points_in_boxes_all (the error prefix).
template <auto Kernel, bool kPart>
at::Tensor points_in_boxes_entry(const at::Tensor& points, const at::Tensor& boxes) {
  detail::check_points_in_boxes(kPart ? kPointsInBoxesPartOp : kPointsInBoxesAllOp, points, boxes);
  return Kernel(points, boxes);
}

} // namespace

at::Tensor points_in_boxes_part(const at::Tensor& points, const at::Tensor& boxes) {
  static const auto op = detail::op_handle<PointsInBoxesFn>("mmops::points_in_boxes_part");
  return op.call(points, boxes);
}

at::Tensor points_in_boxes_all(const at::Tensor& points, const at::Tensor& boxes) {
  static const auto op = detail::op_handle<PointsInBoxesFn>("mmops::points_in_boxes_all");
  return op.call(points, boxes);
}

} // namespace mmops

#define MMOPS_POINTS_IN_BOXES_ENTRIES(m, device)                                                        \
  m.impl("points_in_boxes_part", &points_in_boxes_entry<kernels::points_in_boxes_part_##device, true>); \
  m.impl("points_in_boxes_all", &points_in_boxes_entry<kernels::points_in_boxes_all_##device, false>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_POINTS_IN_BOXES_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "points_in_boxes_part", "points_in_boxes_all")
