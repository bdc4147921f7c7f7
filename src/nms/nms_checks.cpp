// Argument validation of nms, batched_nms, soft_nms and nms_match, on every backend: the
// CPU/CUDA entries run it, and so do the validation-only schemas that the
// Python fake kernels call (sizes may be symbolic, unbacked too).

#include "common/check_utils.h"
#include "nms/nms_ops.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

#include <cmath>
#include <utility>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kNmsOp = "mmops::nms: ";
constexpr const char* kBatchedNmsOp = "mmops::batched_nms: ";
constexpr const char* kSoftNmsOp = "mmops::soft_nms: ";
constexpr const char* kNmsMatchOp = "mmops::nms_match: ";

constexpr std::pair<const char*, SoftNmsMethod> kSoftNmsMethods[] = {
    {"naive", SoftNmsMethod::Naive}, {"linear", SoftNmsMethod::Linear}, {"gaussian", SoftNmsMethod::Gaussian}};

// `t` ([N], one value per box): its shape. A symbolic size check is a
// deferred runtime assert, not a guard: boxes[mask] and scores[mask] have two
// unbacked sizes that only the data makes equal.
void check_one_per_box(const char* op, const char* name, const at::Tensor& t, const at::Tensor& boxes) {
  const c10::SymBool fits = t.dim() == 1 ? t.sym_size(0).sym_eq(boxes.sym_size(0)) : c10::SymBool(false);
  TORCH_SYM_CHECK(fits, op, "expected ", name,
                  " to be a 1-D tensor of shape [N] with N = boxes.size(0) = ", boxes.sym_size(0), ", but got shape ",
                  shape_of(t));
}

void check_boxes_scores(const char* op, const at::Tensor& boxes, const at::Tensor& scores) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.sym_size(1) == 4, op,
              "expected boxes to be a 2-D tensor of shape [N, 4] (x1, y1, x2, y2), but got shape ", shape_of(boxes));
  TORCH_CHECK(at::isFloatingType(boxes.scalar_type()), op, "expected boxes to have a floating point dtype, but got ",
              boxes.scalar_type());
  check_one_per_box(op, "scores", scores, boxes);
  TORCH_CHECK(at::isFloatingType(scores.scalar_type()), op, "expected scores to have a floating point dtype, but got ",
              scores.scalar_type());
  TORCH_CHECK(scores.device() == boxes.device(), op, "expected scores on the device of boxes (", boxes.device(),
              "), but got ", scores.device());
}

void check_threshold(const char* op, const char* name, double value) {
  TORCH_CHECK(!std::isnan(value), op, name, " must be a number, but got nan");
}

} // namespace

void check_nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  check_boxes_scores(kNmsOp, boxes, scores);
  check_threshold(kNmsOp, "iou_threshold", iou_threshold);
}

void check_batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                       double iou_threshold) {
  check_boxes_scores(kBatchedNmsOp, boxes, scores);
  check_threshold(kBatchedNmsOp, "iou_threshold", iou_threshold);
  check_one_per_box(kBatchedNmsOp, "idxs", idxs, boxes);
  TORCH_CHECK(at::isIntegralType(idxs.scalar_type(), /*includeBool=*/false), kBatchedNmsOp,
              "expected idxs (the category of every box) to have an integer dtype, but got ", idxs.scalar_type());
  TORCH_CHECK(idxs.device() == boxes.device(), kBatchedNmsOp, "expected idxs on the device of boxes (", boxes.device(),
              "), but got ", idxs.device());
}

SoftNmsParams check_soft_nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold, double sigma,
                             double min_score, c10::string_view method) {
  check_boxes_scores(kSoftNmsOp, boxes, scores);
  check_threshold(kSoftNmsOp, "iou_threshold", iou_threshold);
  check_threshold(kSoftNmsOp, "min_score", min_score);
  SoftNmsParams p{};
  p.method = parse_choice(kSoftNmsOp, "method", method, kSoftNmsMethods);
  TORCH_CHECK(std::isfinite(sigma) && sigma > 0, kSoftNmsOp, "sigma must be a positive finite number, but got ", sigma);
  p.iou_threshold = iou_threshold;
  p.sigma = sigma;
  p.min_score = min_score;
  return p;
}

void check_nms_match(const at::Tensor& dets, double iou_threshold) {
  TORCH_CHECK(dets.dim() == 2 && dets.sym_size(1) == 5, kNmsMatchOp,
              "expected dets to be a 2-D tensor of shape [N, 5] (x1, y1, x2, y2, score), but got shape ",
              shape_of(dets));
  TORCH_CHECK(at::isFloatingType(dets.scalar_type()), kNmsMatchOp,
              "expected dets to have a floating point dtype, but got ", dets.scalar_type());
  check_threshold(kNmsMatchOp, "iou_threshold", iou_threshold);
}

} // namespace detail
} // namespace mmops
