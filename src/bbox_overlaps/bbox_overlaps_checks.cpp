// Argument validation of bbox_overlaps, on every backend (the meta kernels run
// it too, so fake tensors raise the same errors).

#include "bbox_overlaps/bbox_overlaps_ops.h"
#include "common/check_utils.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = "mmops::bbox_overlaps: ";

void check_grad_output(const at::Tensor& grad_output, const at::Tensor& bboxes1, const at::Tensor& bboxes2,
                       bool aligned) {
  TORCH_CHECK(grad_output.scalar_type() == bboxes1.scalar_type() && grad_output.device() == bboxes1.device(), kOp,
              "expected grad_output to have the dtype and device of bboxes1 (", bboxes1.scalar_type(), ", ",
              bboxes1.device(), "), but got ", grad_output.scalar_type(), ", ", grad_output.device());
  if (aligned) {
    TORCH_CHECK(grad_output.dim() == 1, kOp, "expected grad_output of shape [M], but got ", shape_of(grad_output));
    TORCH_SYM_CHECK(grad_output.sym_size(0).sym_eq(bboxes1.sym_size(0)), kOp, "expected grad_output of shape [",
                    bboxes1.sym_size(0), "], but got ", shape_of(grad_output));
  } else {
    TORCH_CHECK(grad_output.dim() == 2, kOp, "expected grad_output of shape [M, N], but got ", shape_of(grad_output));
    TORCH_SYM_CHECK(grad_output.sym_size(0)
                        .sym_eq(bboxes1.sym_size(0))
                        .sym_and(grad_output.sym_size(1).sym_eq(bboxes2.sym_size(0))),
                    kOp, "expected grad_output of shape [", bboxes1.sym_size(0), ", ", bboxes2.sym_size(0),
                    "], but got ", shape_of(grad_output));
  }
}

} // namespace

OverlapMode parse_overlap_mode(c10::string_view mode) {
  return parse_choice(kOp, "mode", mode, kOverlapModes);
}

BBoxOverlapsParams check_bbox_overlaps(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode,
                                       bool aligned, int64_t offset) {
  TORCH_CHECK(bboxes1.dim() == 2 && bboxes1.sym_size(1) == 4, kOp,
              "expected bboxes1 to be a 2-D tensor of shape [M, 4] (x1, y1, x2, y2), but got shape ",
              shape_of(bboxes1));
  TORCH_CHECK(bboxes2.dim() == 2 && bboxes2.sym_size(1) == 4, kOp,
              "expected bboxes2 to be a 2-D tensor of shape [N, 4] (x1, y1, x2, y2), but got shape ",
              shape_of(bboxes2));
  TORCH_CHECK(at::isFloatingType(bboxes1.scalar_type()), kOp,
              "expected bboxes1 to have a floating point dtype, but got ", bboxes1.scalar_type());
  TORCH_CHECK(bboxes2.scalar_type() == bboxes1.scalar_type(), kOp, "expected bboxes2 to have the dtype of bboxes1 (",
              bboxes1.scalar_type(), "), but got ", bboxes2.scalar_type());
  TORCH_CHECK(bboxes2.device() == bboxes1.device(), kOp, "expected bboxes2 on the device of bboxes1 (",
              bboxes1.device(), "), but got ", bboxes2.device());
  const OverlapMode parsed = parse_overlap_mode(mode);
  TORCH_CHECK(offset == 0 || offset == 1, kOp, "offset must be 0 or 1, but got ", offset);
  if (aligned) {
    TORCH_SYM_CHECK(bboxes1.sym_size(0).sym_eq(bboxes2.sym_size(0)), kOp,
                    "aligned=True needs as many bboxes1 as bboxes2, but got ", bboxes1.sym_size(0), " and ",
                    bboxes2.sym_size(0));
  }
  return BBoxOverlapsParams{parsed == OverlapMode::IoF, aligned, offset};
}

BBoxOverlapsParams check_bbox_overlaps_backward(const at::Tensor& grad_output, const at::Tensor& bboxes1,
                                                const at::Tensor& bboxes2, c10::string_view mode, bool aligned,
                                                int64_t offset) {
  const BBoxOverlapsParams p = check_bbox_overlaps(bboxes1, bboxes2, mode, aligned, offset);
  check_grad_output(grad_output, bboxes1, bboxes2, aligned);
  return p;
}

} // namespace detail
} // namespace mmops
