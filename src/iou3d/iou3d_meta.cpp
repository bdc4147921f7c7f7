// Meta (shape and dtype only) kernels of boxes_overlap_bev and boxes_iou_bev.

#include "iou3d/iou3d_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor boxes_overlap_bev_meta(const at::Tensor& boxes_a, const at::Tensor& boxes_b) {
  detail::check_boxes_overlap_bev(boxes_a, boxes_b);
  return at::empty_symint(kernels::bev_overlaps_shape(boxes_a, boxes_b), boxes_a.options());
}

at::Tensor boxes_iou_bev_meta(const at::Tensor& boxes_a, const at::Tensor& boxes_b) {
  detail::check_boxes_iou_bev(boxes_a, boxes_b);
  return at::empty_symint(kernels::bev_overlaps_shape(boxes_a, boxes_b), boxes_a.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("boxes_overlap_bev", &mmops::boxes_overlap_bev_meta);
  m.impl("boxes_iou_bev", &mmops::boxes_iou_bev_meta);
}
