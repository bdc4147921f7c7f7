// Argument validation of the iou3d family, on every backend: the CPU/CUDA
// entries run it, the meta kernels too, and so do the validation-only schemas
// that the Python fake kernels of the NMS ops call (sizes may be symbolic).

#include "common/check_utils.h"
#include "iou3d/iou3d_ops.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

#include <cmath>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kXyxyr = "(x1, y1, x2, y2, ry)";

void check_box_rows(const char* op, const char* name, const char* rows, const at::Tensor& t, int64_t cols,
                    const char* layout) {
  TORCH_CHECK(t.dim() == 2 && t.sym_size(1) == cols, op, "expected ", name, " to be a 2-D tensor of shape [", rows,
              ", ", cols, "] ", layout, ", but got shape ", shape_of(t));
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, "expected ", name, " to have a floating point dtype, but got ",
              t.scalar_type());
}

BevOverlapParams check_pairs(const char* op, int64_t cols, const char* layout, const at::Tensor& boxes_a,
                             const at::Tensor& boxes_b) {
  check_box_rows(op, "boxes_a", "N", boxes_a, cols, layout);
  check_box_rows(op, "boxes_b", "M", boxes_b, cols, layout);
  TORCH_CHECK(boxes_b.scalar_type() == boxes_a.scalar_type(), op, "expected boxes_b to have the dtype of boxes_a (",
              boxes_a.scalar_type(), "), but got ", boxes_b.scalar_type());
  TORCH_CHECK(boxes_b.device() == boxes_a.device(), op, "expected boxes_b on the device of boxes_a (", boxes_a.device(),
              "), but got ", boxes_b.device());
  if (boxes_a.sym_size(0).maybe_as_int() && boxes_b.sym_size(0).maybe_as_int()) {
    // Concrete sizes (symbolic ones are bounded when they become concrete).
    checked_mul(op, "the output size N * M", *boxes_a.sym_size(0).maybe_as_int(), *boxes_b.sym_size(0).maybe_as_int());
  }
  return BevOverlapParams{cols == 5, false};
}

// boxes [N, 5] (x1, y1, x2, y2, ry) and scores [N]. A symbolic size check is
// a deferred runtime assert, not a guard (boxes[mask] and scores[mask] have
// two unbacked sizes that only the data makes equal).
NmsBevParams check_nms(const char* op, const at::Tensor& boxes, const at::Tensor& scores, double thresh) {
  check_box_rows(op, "boxes", "N", boxes, 5, kXyxyr);
  const c10::SymBool fits = scores.dim() == 1 ? scores.sym_size(0).sym_eq(boxes.sym_size(0)) : c10::SymBool(false);
  TORCH_SYM_CHECK(fits, op,
                  "expected scores to be a 1-D tensor of shape [N] with N = boxes.size(0) = ", boxes.sym_size(0),
                  ", but got shape ", shape_of(scores));
  TORCH_CHECK(at::isFloatingType(scores.scalar_type()), op, "expected scores to have a floating point dtype, but got ",
              scores.scalar_type());
  TORCH_CHECK(scores.device() == boxes.device(), op, "expected scores on the device of boxes (", boxes.device(),
              "), but got ", scores.device());
  TORCH_CHECK(!std::isnan(thresh), op, "thresh must be a number, but got nan");
  return NmsBevParams{thresh, -1, -1};
}

int64_t max_size(const char* op, const char* name, std::optional<int64_t> value) {
  if (!value.has_value()) {
    return -1;
  }
  TORCH_CHECK(*value >= 0, op, name, " must be None or >= 0, but got ", *value);
  return *value;
}

} // namespace

BevOverlapParams check_boxes_overlap_bev(const at::Tensor& boxes_a, const at::Tensor& boxes_b) {
  return check_pairs("mmops::boxes_overlap_bev: ", 7, "(x, y, z, dx, dy, dz, heading)", boxes_a, boxes_b);
}

BevOverlapParams check_boxes_iou_bev(const at::Tensor& boxes_a, const at::Tensor& boxes_b) {
  BevOverlapParams p = check_pairs("mmops::boxes_iou_bev: ", 5, kXyxyr, boxes_a, boxes_b);
  p.iou = true;
  return p;
}

NmsBevParams check_nms_bev(const at::Tensor& boxes, const at::Tensor& scores, double thresh,
                           std::optional<int64_t> pre_max_size, std::optional<int64_t> post_max_size) {
  constexpr const char* op = "mmops::nms_bev: ";
  NmsBevParams p = check_nms(op, boxes, scores, thresh);
  p.pre_max_size = max_size(op, "pre_max_size", pre_max_size);
  p.post_max_size = max_size(op, "post_max_size", post_max_size);
  return p;
}

NmsBevParams check_nms_normal_bev(const at::Tensor& boxes, const at::Tensor& scores, double thresh) {
  return check_nms("mmops::nms_normal_bev: ", boxes, scores, thresh);
}

} // namespace detail
} // namespace mmops
