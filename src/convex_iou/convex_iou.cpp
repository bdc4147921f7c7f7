// mmops::convex_iou and mmops::convex_giou: schemas, device entries
// (CPU/CUDA registration) and the public C++ API. Validation in
// convex_iou_checks.cpp, kernels in kernels/convex_iou, meta in
// convex_iou_meta.cpp, autograd in convex_iou_autograd.cpp.

#include "convex_iou/convex_iou_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/convex_iou.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  mmops::detail::define_op(m, "convex_iou(Tensor pointsets, Tensor polygons) -> Tensor");
  mmops::detail::define_op(m, "convex_giou(Tensor pointsets, Tensor polygons) -> (Tensor giou, Tensor grad)");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor convex_iou_entry(const at::Tensor& pointsets, const at::Tensor& polygons) {
  detail::check_convex_iou(pointsets, polygons);
  return Kernel(pointsets, polygons);
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> convex_giou_entry(const at::Tensor& pointsets, const at::Tensor& polygons) {
  detail::check_convex_giou(pointsets, polygons);
  return Kernel(pointsets, polygons);
}

} // namespace

at::Tensor convex_iou(const at::Tensor& pointsets, const at::Tensor& polygons) {
  static const auto op = detail::op_handle<ConvexIoUFn>("mmops::convex_iou");
  return op.call(pointsets, polygons);
}

std::tuple<at::Tensor, at::Tensor> convex_giou(const at::Tensor& pointsets, const at::Tensor& polygons) {
  static const auto op = detail::op_handle<ConvexGIoUFn>("mmops::convex_giou");
  return op.call(pointsets, polygons);
}

} // namespace mmops

#define MMOPS_CONVEX_IOU_ENTRIES(m, device)                              \
  m.impl("convex_iou", &convex_iou_entry<kernels::convex_iou_##device>); \
  m.impl("convex_giou", &convex_giou_entry<kernels::convex_giou_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_CONVEX_IOU_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "convex_iou", "convex_giou")
