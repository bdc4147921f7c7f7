// mmops::diff_iou_rotated_2d and mmops::diff_iou_rotated_3d: schemas, device
// entries (CPU/CUDA registration) and the public C++ API. Validation is in
// diff_iou_rotated_checks.cpp, kernels in kernels/diff_iou_rotated, the meta
// (shape) functions in diff_iou_rotated_meta.cpp and autograd in
// diff_iou_rotated_autograd.cpp.

#include "diff_iou_rotated/diff_iou_rotated_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/diff_iou_rotated.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "diff_iou_rotated_2d(Tensor box1, Tensor box2) -> Tensor");
  define_op(m,
            "_diff_iou_rotated_2d_backward(Tensor grad_output, Tensor box1, Tensor box2) -> "
            "(Tensor grad_box1, Tensor grad_box2)");
  define_op(m, "diff_iou_rotated_3d(Tensor box3d1, Tensor box3d2) -> Tensor");
  define_op(m,
            "_diff_iou_rotated_3d_backward(Tensor grad_output, Tensor box3d1, Tensor box3d2) -> "
            "(Tensor grad_box3d1, Tensor grad_box3d2)");
}

namespace mmops {
namespace {

template <int64_t kColumns, auto Kernel>
at::Tensor forward_entry(const at::Tensor& box1, const at::Tensor& box2) {
  const DiffIouRotatedParams p = detail::check_diff_iou_rotated(kColumns, box1, box2);
  return Kernel(box1, box2, p);
}

template <int64_t kColumns, auto Kernel>
std::tuple<at::Tensor, at::Tensor> backward_entry(const at::Tensor& grad_output, const at::Tensor& box1,
                                                  const at::Tensor& box2) {
  const DiffIouRotatedParams p = detail::check_diff_iou_rotated_backward(kColumns, grad_output, box1, box2);
  return Kernel(grad_output, box1, box2, p);
}

} // namespace

at::Tensor diff_iou_rotated_2d(const at::Tensor& box1, const at::Tensor& box2) {
  static const auto op = detail::op_handle<DiffIouRotatedFn>("mmops::diff_iou_rotated_2d");
  return op.call(box1, box2);
}

at::Tensor diff_iou_rotated_3d(const at::Tensor& box3d1, const at::Tensor& box3d2) {
  static const auto op = detail::op_handle<DiffIouRotatedFn>("mmops::diff_iou_rotated_3d");
  return op.call(box3d1, box3d2);
}

} // namespace mmops

#define MMOPS_DIFF_IOU_ROTATED_ENTRIES(m, device)                                                           \
  m.impl("diff_iou_rotated_2d", &forward_entry<5, kernels::diff_iou_rotated_forward_##device>);             \
  m.impl("_diff_iou_rotated_2d_backward", &backward_entry<5, kernels::diff_iou_rotated_backward_##device>); \
  m.impl("diff_iou_rotated_3d", &forward_entry<7, kernels::diff_iou_rotated_forward_##device>);             \
  m.impl("_diff_iou_rotated_3d_backward", &backward_entry<7, kernels::diff_iou_rotated_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_DIFF_IOU_ROTATED_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kFloat32, "diff_iou_rotated_2d", "diff_iou_rotated_3d")
