// mmops::boxes_overlap_bev, boxes_iou_bev, nms_bev and nms_normal_bev (mmcv's
// iou3d BEV ops): schemas, CPU/CUDA registration and the public C++ API.
// Validation is in iou3d_checks.cpp, kernels in kernels/iou3d (the geometry:
// kernels/common/polygon.h), the meta kernels of the overlaps in
// iou3d_meta.cpp, autograd (none) in iou3d_autograd.cpp.
//
// The NMS ops' output size depends on the data: their fake kernels are in
// Python (python/mmops/_fake.py, an unbacked size) and validate through the
// validation-only schemas below.

#include "common/autocast.h"
#include "common/dispatch.h"
#include "iou3d/iou3d_ops.h"

#include <mmops/iou3d.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "boxes_overlap_bev(Tensor boxes_a, Tensor boxes_b) -> Tensor");
  define_op(m, "boxes_iou_bev(Tensor boxes_a, Tensor boxes_b) -> Tensor");
  define_op(m,
            "nms_bev(Tensor boxes, Tensor scores, float thresh, int? pre_max_size=None, "
            "int? post_max_size=None) -> Tensor");
  define_op(m, "nms_normal_bev(Tensor boxes, Tensor scores, float thresh) -> Tensor");
  // Validation only (the arguments of the NMS ops, nothing returned): for the fake kernels.
  m.def(
      "_nms_bev_check(Tensor boxes, Tensor scores, float thresh, int? pre_max_size=None, "
      "int? post_max_size=None) -> ()");
  m.def("_nms_normal_bev_check(Tensor boxes, Tensor scores, float thresh) -> ()");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor boxes_overlap_bev_entry(const at::Tensor& boxes_a, const at::Tensor& boxes_b) {
  return Kernel(boxes_a, boxes_b, detail::check_boxes_overlap_bev(boxes_a, boxes_b));
}

template <auto Kernel>
at::Tensor boxes_iou_bev_entry(const at::Tensor& boxes_a, const at::Tensor& boxes_b) {
  return Kernel(boxes_a, boxes_b, detail::check_boxes_iou_bev(boxes_a, boxes_b));
}

at::Tensor nms_bev_entry(const at::Tensor& boxes, const at::Tensor& scores, double thresh,
                         std::optional<int64_t> pre_max_size, std::optional<int64_t> post_max_size) {
  return kernels::nms_bev_any(boxes, scores, detail::check_nms_bev(boxes, scores, thresh, pre_max_size, post_max_size));
}

at::Tensor nms_normal_bev_entry(const at::Tensor& boxes, const at::Tensor& scores, double thresh) {
  return kernels::nms_normal_bev_any(boxes, scores, detail::check_nms_normal_bev(boxes, scores, thresh));
}

void nms_bev_check(const at::Tensor& boxes, const at::Tensor& scores, double thresh,
                   std::optional<int64_t> pre_max_size, std::optional<int64_t> post_max_size) {
  detail::check_nms_bev(boxes, scores, thresh, pre_max_size, post_max_size);
}

void nms_normal_bev_check(const at::Tensor& boxes, const at::Tensor& scores, double thresh) {
  detail::check_nms_normal_bev(boxes, scores, thresh);
}

} // namespace

at::Tensor boxes_overlap_bev(const at::Tensor& boxes_a, const at::Tensor& boxes_b) {
  static const auto op = detail::op_handle<BoxesOverlapBevFn>("mmops::boxes_overlap_bev");
  return op.call(boxes_a, boxes_b);
}

at::Tensor boxes_iou_bev(const at::Tensor& boxes_a, const at::Tensor& boxes_b) {
  static const auto op = detail::op_handle<BoxesOverlapBevFn>("mmops::boxes_iou_bev");
  return op.call(boxes_a, boxes_b);
}

at::Tensor nms_bev(const at::Tensor& boxes, const at::Tensor& scores, double thresh,
                   std::optional<int64_t> pre_max_size, std::optional<int64_t> post_max_size) {
  static const auto op = detail::op_handle<NmsBevFn>("mmops::nms_bev");
  return op.call(boxes, scores, thresh, pre_max_size, post_max_size);
}

at::Tensor nms_normal_bev(const at::Tensor& boxes, const at::Tensor& scores, double thresh) {
  static const auto op = detail::op_handle<NmsNormalBevFn>("mmops::nms_normal_bev");
  return op.call(boxes, scores, thresh);
}

} // namespace mmops

// The NMS entries are the same on both devices (ATen ops and the dispatcher).
#define MMOPS_IOU3D_ENTRIES(m, device)                                                   \
  m.impl("boxes_overlap_bev", &boxes_overlap_bev_entry<kernels::bev_overlaps_##device>); \
  m.impl("boxes_iou_bev", &boxes_iou_bev_entry<kernels::bev_overlaps_##device>);         \
  m.impl("nms_bev", &nms_bev_entry);                                                     \
  m.impl("nms_normal_bev", &nms_normal_bev_entry);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_IOU3D_ENTRIES)

// Every backend, fake and meta tensors included.
TORCH_LIBRARY_IMPL(mmops, CompositeExplicitAutograd, m) {
  m.impl("_nms_bev_check", &mmops::nms_bev_check);
  m.impl("_nms_normal_bev_check", &mmops::nms_normal_bev_check);
}
MMOPS_REGISTER_AUTOCAST(kDataDtype, "boxes_overlap_bev", "boxes_iou_bev", "nms_bev", "nms_normal_bev")
