// mmops::box_iou_rotated and box_iou_quadri: schemas, CPU/CUDA registration
// and the public C++ API. Validation is in box_iou_rotated_checks.cpp, kernels
// in kernels/box_iou_rotated (the geometry: kernels/common/polygon.h), the
// meta kernels in box_iou_rotated_meta.cpp, autograd (none) in
// box_iou_rotated_autograd.cpp.

#include "box_iou_rotated/box_iou_rotated_ops.h"
#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/box_iou_rotated.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "box_iou_rotated(Tensor boxes1, Tensor boxes2, str mode=\"iou\", bool aligned=False, "
            "bool clockwise=True) -> Tensor");
  define_op(m, "box_iou_quadri(Tensor boxes1, Tensor boxes2, str mode=\"iou\", bool aligned=False) -> Tensor");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor box_iou_rotated_entry(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode,
                                 bool aligned, bool clockwise) {
  const BoxIouRotatedParams p = detail::check_box_iou_rotated(boxes1, boxes2, mode, aligned, clockwise);
  return Kernel(boxes1, boxes2, p);
}

template <auto Kernel>
at::Tensor box_iou_quadri_entry(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode,
                                bool aligned) {
  const BoxIouRotatedParams p = detail::check_box_iou_quadri(boxes1, boxes2, mode, aligned);
  return Kernel(boxes1, boxes2, p);
}

} // namespace

at::Tensor box_iou_rotated(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode, bool aligned,
                           bool clockwise) {
  static const auto op = detail::op_handle<BoxIouRotatedFn>("mmops::box_iou_rotated");
  return op.call(boxes1, boxes2, mode, aligned, clockwise);
}

at::Tensor box_iou_quadri(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode, bool aligned) {
  static const auto op = detail::op_handle<BoxIouQuadriFn>("mmops::box_iou_quadri");
  return op.call(boxes1, boxes2, mode, aligned);
}

} // namespace mmops

#define MMOPS_BOX_IOU_ROTATED_ENTRIES(m, device)                                        \
  m.impl("box_iou_rotated", &box_iou_rotated_entry<kernels::box_iou_rotated_##device>); \
  m.impl("box_iou_quadri", &box_iou_quadri_entry<kernels::box_iou_rotated_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_BOX_IOU_ROTATED_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "box_iou_rotated", "box_iou_quadri")
