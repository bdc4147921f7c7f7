// Argument validation of box_iou_rotated and box_iou_quadri, on every backend
// (the meta kernels run it too, so fake tensors raise the same errors).

#include "box_iou_rotated/box_iou_rotated_ops.h"
#include "common/check_utils.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

#include <utility>

namespace mmops {
namespace detail {
namespace {

enum class Mode : int64_t { IoU, IoF };
constexpr std::pair<const char*, Mode> kModes[] = {{"iou", Mode::IoU}, {"iof", Mode::IoF}};

BoxIouRotatedParams check_pairs(const char* op, int64_t cols, const char* layout, const at::Tensor& boxes1,
                                const at::Tensor& boxes2, c10::string_view mode, bool aligned) {
  TORCH_CHECK(boxes1.dim() == 2 && boxes1.sym_size(1) == cols, op, "expected boxes1 to be a 2-D tensor of shape [N, ",
              cols, "] ", layout, ", but got shape ", shape_of(boxes1));
  TORCH_CHECK(boxes2.dim() == 2 && boxes2.sym_size(1) == cols, op, "expected boxes2 to be a 2-D tensor of shape [M, ",
              cols, "] ", layout, ", but got shape ", shape_of(boxes2));
  TORCH_CHECK(at::isFloatingType(boxes1.scalar_type()), op, "expected boxes1 to have a floating point dtype, but got ",
              boxes1.scalar_type());
  TORCH_CHECK(boxes2.scalar_type() == boxes1.scalar_type(), op, "expected boxes2 to have the dtype of boxes1 (",
              boxes1.scalar_type(), "), but got ", boxes2.scalar_type());
  TORCH_CHECK(boxes2.device() == boxes1.device(), op, "expected boxes2 on the device of boxes1 (", boxes1.device(),
              "), but got ", boxes2.device());
  const Mode parsed = parse_choice(op, "mode", mode, kModes);
  if (aligned) {
    TORCH_SYM_CHECK(boxes1.sym_size(0).sym_eq(boxes2.sym_size(0)), op,
                    "aligned=True needs as many boxes1 as boxes2, but got ", boxes1.sym_size(0), " and ",
                    boxes2.sym_size(0));
  } else if (boxes1.sym_size(0).maybe_as_int() && boxes2.sym_size(0).maybe_as_int()) {
    // Concrete sizes (symbolic ones are bounded when they become concrete).
    checked_mul(op, "the output size N * M", *boxes1.sym_size(0).maybe_as_int(), *boxes2.sym_size(0).maybe_as_int());
  }
  return BoxIouRotatedParams{parsed == Mode::IoF, aligned, true, false};
}

} // namespace

BoxIouRotatedParams check_box_iou_rotated(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode,
                                          bool aligned, bool clockwise) {
  BoxIouRotatedParams p =
      check_pairs("mmops::box_iou_rotated: ", 5, "(cx, cy, w, h, angle)", boxes1, boxes2, mode, aligned);
  p.clockwise = clockwise;
  return p;
}

BoxIouRotatedParams check_box_iou_quadri(const at::Tensor& boxes1, const at::Tensor& boxes2, c10::string_view mode,
                                         bool aligned) {
  BoxIouRotatedParams p =
      check_pairs("mmops::box_iou_quadri: ", 8, "(x1, y1, ..., x4, y4)", boxes1, boxes2, mode, aligned);
  p.quadri = true;
  return p;
}

} // namespace detail
} // namespace mmops
