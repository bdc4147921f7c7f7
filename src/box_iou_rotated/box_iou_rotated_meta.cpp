// Meta (shape and dtype only) kernels of box_iou_rotated and box_iou_quadri.

#include "box_iou_rotated/box_iou_rotated_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor box_iou_rotated_meta(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode, bool aligned,
                                bool clockwise) {
  detail::check_box_iou_rotated(boxes1, boxes2, mode, aligned, clockwise);
  return at::empty_symint(kernels::rotated_overlaps_shape(boxes1, boxes2, aligned), boxes1.options());
}

at::Tensor box_iou_quadri_meta(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode,
                               bool aligned) {
  detail::check_box_iou_quadri(boxes1, boxes2, mode, aligned);
  return at::empty_symint(kernels::rotated_overlaps_shape(boxes1, boxes2, aligned), boxes1.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("box_iou_rotated", &mmops::box_iou_rotated_meta);
  m.impl("box_iou_quadri", &mmops::box_iou_quadri_meta);
}
