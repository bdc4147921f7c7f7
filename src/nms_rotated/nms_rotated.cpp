// mmops::nms_rotated and nms_quadri: schemas, CPU/CUDA registration and the
// public C++ API. Validation is in nms_rotated_checks.cpp, kernels in
// kernels/nms_rotated (the IoU: kernels/common/rotated_iou.h, polygon.h), the
// Autograd registration (not differentiable) in nms_rotated_autograd.cpp.
//
// The output size depends on the data, so there is no C++ meta kernel: the
// fake kernels are in Python (python/mmops/_fake.py, an unbacked size) and
// validate through the validation-only schemas below.

#include "common/autocast.h"
#include "common/dispatch.h"
#include "nms_rotated/nms_rotated_ops.h"

#include <mmops/nms_rotated.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "nms_rotated(Tensor boxes, Tensor scores, float iou_threshold, Tensor? labels=None, "
            "bool clockwise=True) -> Tensor");
  define_op(m, "nms_quadri(Tensor boxes, Tensor scores, float iou_threshold, Tensor? labels=None) -> Tensor");
  // Validation only (the arguments of the ops above, nothing returned): for the fake kernels.
  m.def(
      "_nms_rotated_check(Tensor boxes, Tensor scores, float iou_threshold, Tensor? labels=None, "
      "bool clockwise=True) -> ()");
  m.def("_nms_quadri_check(Tensor boxes, Tensor scores, float iou_threshold, Tensor? labels=None) -> ()");
}

namespace mmops {
namespace {

at::Tensor defined_or_empty(const std::optional<at::Tensor>& labels) {
  return labels.has_value() ? *labels : at::Tensor();
}

template <auto Kernel>
at::Tensor nms_rotated_entry(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                             const std::optional<at::Tensor>& labels, bool clockwise) {
  const NmsRotatedParams p = detail::check_nms_rotated(boxes, scores, iou_threshold, labels, clockwise);
  return Kernel(boxes, scores, defined_or_empty(labels), p);
}

template <auto Kernel>
at::Tensor nms_quadri_entry(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                            const std::optional<at::Tensor>& labels) {
  const NmsRotatedParams p = detail::check_nms_quadri(boxes, scores, iou_threshold, labels);
  return Kernel(boxes, scores, defined_or_empty(labels), p);
}

void nms_rotated_check(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                       const std::optional<at::Tensor>& labels, bool clockwise) {
  detail::check_nms_rotated(boxes, scores, iou_threshold, labels, clockwise);
}

void nms_quadri_check(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                      const std::optional<at::Tensor>& labels) {
  detail::check_nms_quadri(boxes, scores, iou_threshold, labels);
}

} // namespace

at::Tensor nms_rotated(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                       const std::optional<at::Tensor>& labels, bool clockwise) {
  static const auto op = detail::op_handle<NmsRotatedFn>("mmops::nms_rotated");
  return op.call(boxes, scores, iou_threshold, labels, clockwise);
}

at::Tensor nms_quadri(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                      const std::optional<at::Tensor>& labels) {
  static const auto op = detail::op_handle<NmsQuadriFn>("mmops::nms_quadri");
  return op.call(boxes, scores, iou_threshold, labels);
}

} // namespace mmops

#define MMOPS_NMS_ROTATED_ENTRIES(m, device)                                \
  m.impl("nms_rotated", &nms_rotated_entry<kernels::nms_rotated_##device>); \
  m.impl("nms_quadri", &nms_quadri_entry<kernels::nms_rotated_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_NMS_ROTATED_ENTRIES)

// Every backend, fake and meta tensors included.
TORCH_LIBRARY_IMPL(mmops, CompositeExplicitAutograd, m) {
  m.impl("_nms_rotated_check", &mmops::nms_rotated_check);
  m.impl("_nms_quadri_check", &mmops::nms_quadri_check);
}
MMOPS_REGISTER_AUTOCAST(kDataDtype, "nms_rotated", "nms_quadri")
