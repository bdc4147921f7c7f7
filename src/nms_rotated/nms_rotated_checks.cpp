// Argument validation of nms_rotated and nms_quadri, on every backend: the
// CPU/CUDA entries run it, and so do the validation-only schemas that the
// Python fake kernels call (sizes may be symbolic, unbacked too).

#include "common/check_utils.h"
#include "nms_rotated/nms_rotated_ops.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

#include <cmath>

namespace mmops {
namespace detail {
namespace {

// A symbolic size check is a deferred runtime assert, not a guard (boxes[mask]
// and scores[mask] have two unbacked sizes that only the data makes equal).
void check_one_per_box(const char* op, const char* name, const at::Tensor& t, const at::Tensor& boxes) {
  const c10::SymBool fits = t.dim() == 1 ? t.sym_size(0).sym_eq(boxes.sym_size(0)) : c10::SymBool(false);
  TORCH_SYM_CHECK(fits, op, "expected ", name,
                  " to be a 1-D tensor of shape [N] with N = boxes.size(0) = ", boxes.sym_size(0), ", but got shape ",
                  shape_of(t));
}

NmsRotatedParams check_nms(const char* op, int64_t cols, const char* layout, const at::Tensor& boxes,
                           const at::Tensor& scores, double iou_threshold, const std::optional<at::Tensor>& labels) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.sym_size(1) == cols, op, "expected boxes to be a 2-D tensor of shape [N, ",
              cols, "] ", layout, ", but got shape ", shape_of(boxes));
  TORCH_CHECK(at::isFloatingType(boxes.scalar_type()), op, "expected boxes to have a floating point dtype, but got ",
              boxes.scalar_type());
  check_one_per_box(op, "scores", scores, boxes);
  TORCH_CHECK(at::isFloatingType(scores.scalar_type()), op, "expected scores to have a floating point dtype, but got ",
              scores.scalar_type());
  TORCH_CHECK(scores.device() == boxes.device(), op, "expected scores on the device of boxes (", boxes.device(),
              "), but got ", scores.device());
  TORCH_CHECK(!std::isnan(iou_threshold), op, "iou_threshold must be a number, but got nan");
  if (labels.has_value() && labels->defined()) {
    check_one_per_box(op, "labels", *labels, boxes);
    const auto dtype = labels->scalar_type();
    TORCH_CHECK(at::isFloatingType(dtype) || at::isIntegralType(dtype, /*includeBool=*/false), op,
                "expected labels to have an integer or floating point dtype, but got ", dtype);
    TORCH_CHECK(labels->device() == boxes.device(), op, "expected labels on the device of boxes (", boxes.device(),
                "), but got ", labels->device());
  }
  return NmsRotatedParams{iou_threshold, true, cols == 8};
}

} // namespace

NmsRotatedParams check_nms_rotated(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                                   const std::optional<at::Tensor>& labels, bool clockwise) {
  NmsRotatedParams p =
      check_nms("mmops::nms_rotated: ", 5, "(cx, cy, w, h, angle)", boxes, scores, iou_threshold, labels);
  p.clockwise = clockwise;
  return p;
}

NmsRotatedParams check_nms_quadri(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                                  const std::optional<at::Tensor>& labels) {
  return check_nms("mmops::nms_quadri: ", 8, "(x1, y1, ..., x4, y4)", boxes, scores, iou_threshold, labels);
}

} // namespace detail
} // namespace mmops
