// Argument validation of diff_iou_rotated_2d / _3d, on every backend (the
// meta kernels run it too, so fake tensors raise the same errors).

#include "common/check_utils.h"
#include "diff_iou_rotated/diff_iou_rotated_ops.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

namespace mmops {
namespace detail {
namespace {

const char* op_prefix(int64_t columns) {
  return columns == 7 ? "mmops::diff_iou_rotated_3d: " : "mmops::diff_iou_rotated_2d: ";
}

void check_boxes(const char* op, const char* name, const at::Tensor& boxes, int64_t columns) {
  const char* layout = columns == 7 ? "(x, y, z, w, h, l, alpha)" : "(x, y, w, h, alpha)";
  TORCH_CHECK(boxes.dim() == 3 && boxes.sym_size(2) == columns, op, "expected ", name,
              " to be a 3-D tensor of shape [B, N, ", columns, "] ", layout, ", but got shape ", shape_of(boxes));
  TORCH_CHECK(at::isFloatingType(boxes.scalar_type()), op, "expected ", name,
              " to have a floating point dtype, but got ", boxes.scalar_type());
}

} // namespace

DiffIouRotatedParams check_diff_iou_rotated(int64_t columns, const at::Tensor& box1, const at::Tensor& box2) {
  const char* op = op_prefix(columns);
  const char* first = columns == 7 ? "box3d1" : "box1";
  const char* second = columns == 7 ? "box3d2" : "box2";
  check_boxes(op, first, box1, columns);
  check_boxes(op, second, box2, columns);
  TORCH_CHECK(box2.scalar_type() == box1.scalar_type(), op, "expected ", second, " to have the dtype of ", first, " (",
              box1.scalar_type(), "), but got ", box2.scalar_type());
  TORCH_CHECK(box2.device() == box1.device(), op, "expected ", second, " on the device of ", first, " (", box1.device(),
              "), but got ", box2.device());
  TORCH_SYM_CHECK(box1.sym_size(0).sym_eq(box2.sym_size(0)).sym_and(box1.sym_size(1).sym_eq(box2.sym_size(1))), op,
                  "expected ", second, " of the shape of ", first, " (aligned pairs) ", shape_of(box1), ", but got ",
                  shape_of(box2));
  return DiffIouRotatedParams{columns};
}

DiffIouRotatedParams check_diff_iou_rotated_backward(int64_t columns, const at::Tensor& grad_output,
                                                     const at::Tensor& box1, const at::Tensor& box2) {
  const DiffIouRotatedParams p = check_diff_iou_rotated(columns, box1, box2);
  const char* op = op_prefix(columns);
  TORCH_CHECK(grad_output.scalar_type() == box1.scalar_type() && grad_output.device() == box1.device(), op,
              "expected grad_output to have the dtype and device of the boxes (", box1.scalar_type(), ", ",
              box1.device(), "), but got ", grad_output.scalar_type(), ", ", grad_output.device());
  TORCH_CHECK(grad_output.dim() == 2, op, "expected grad_output of shape [B, N], but got ", shape_of(grad_output));
  TORCH_SYM_CHECK(
      grad_output.sym_size(0).sym_eq(box1.sym_size(0)).sym_and(grad_output.sym_size(1).sym_eq(box1.sym_size(1))), op,
      "expected grad_output of shape [", box1.sym_size(0), ", ", box1.sym_size(1), "], but got ",
      shape_of(grad_output));
  return p;
}

} // namespace detail
} // namespace mmops
