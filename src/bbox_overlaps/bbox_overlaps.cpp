// mmops::bbox_overlaps: schemas, CPU/CUDA registration and the public C++ API.
// Validation is in bbox_overlaps_checks.cpp, kernels in kernels/bbox_overlaps
// (the overlap math, shared with nms: kernels/common/box_iou.h), the meta
// (shape) functions in bbox_overlaps_meta.cpp and autograd in
// bbox_overlaps_autograd.cpp.

#include "bbox_overlaps/bbox_overlaps_ops.h"
#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/bbox_overlaps.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  mmops::detail::define_op(
      m, "bbox_overlaps(Tensor bboxes1, Tensor bboxes2, str mode=\"iou\", bool aligned=False, int offset=0) -> Tensor");
  mmops::detail::define_op(
      m,
      "_bbox_overlaps_backward(Tensor grad_output, Tensor bboxes1, Tensor bboxes2, str mode, bool aligned, "
      "int offset) -> (Tensor grad_bboxes1, Tensor grad_bboxes2)");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor bbox_overlaps_entry(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode,
                               bool aligned, int64_t offset) {
  const BBoxOverlapsParams p = detail::check_bbox_overlaps(bboxes1, bboxes2, mode, aligned, offset);
  return Kernel(bboxes1, bboxes2, p);
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> bbox_overlaps_backward_entry(const at::Tensor& grad_output,
                                                                const at::Tensor& bboxes1, const at::Tensor& bboxes2,
                                                                c10::string_view mode, bool aligned, int64_t offset) {
  const BBoxOverlapsParams p =
      detail::check_bbox_overlaps_backward(grad_output, bboxes1, bboxes2, mode, aligned, offset);
  return Kernel(grad_output, bboxes1, bboxes2, p);
}

} // namespace

at::Tensor bbox_overlaps(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode, bool aligned,
                         int64_t offset) {
  static const auto op = detail::op_handle<BBoxOverlapsFn>("mmops::bbox_overlaps");
  return op.call(bboxes1, bboxes2, mode, aligned, offset);
}

} // namespace mmops

#define MMOPS_BBOX_OVERLAPS_ENTRIES(m, device)                                    \
  m.impl("bbox_overlaps", &bbox_overlaps_entry<kernels::bbox_overlaps_##device>); \
  m.impl("_bbox_overlaps_backward", &bbox_overlaps_backward_entry<kernels::bbox_overlaps_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_BBOX_OVERLAPS_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "bbox_overlaps")
