// Meta (shape and dtype only) kernels of convex_iou and convex_giou. Sizes
// stay symbolic.

#include "convex_iou/convex_iou_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor convex_iou_meta(const at::Tensor& pointsets, const at::Tensor& polygons) {
  detail::check_convex_iou(pointsets, polygons);
  return at::empty_symint({pointsets.sym_size(0), polygons.sym_size(0)}, pointsets.options());
}

std::tuple<at::Tensor, at::Tensor> convex_giou_meta(const at::Tensor& pointsets, const at::Tensor& polygons) {
  detail::check_convex_giou(pointsets, polygons);
  return {at::empty_symint({pointsets.sym_size(0)}, pointsets.options()),
          at::empty_symint({pointsets.sym_size(0), 18}, pointsets.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("convex_iou", &mmops::convex_iou_meta);
  m.impl("convex_giou", &mmops::convex_giou_meta);
}
