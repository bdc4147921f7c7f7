// nms_bev and nms_normal_bev on any device, as mmcv 2.x defines them: its
// deprecated iou3d functions convert the boxes and call nms_rotated / nms.
// Here the conversion runs in the compute type (float for half/bfloat16) and
// the suppression in mmops::nms_rotated / mmops::nms (one IoU code path:
// nms_bev's IoU is exactly boxes_iou_bev's).

#include "common/score_order.h"
#include "iou3d/iou3d_kernels.h"

#include <mmops/nms.h>
#include <mmops/nms_rotated.h>

#include <ATen/OpMathType.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sub.h>

namespace mmops {
namespace kernels {
namespace {

// (x1, y1, x2, y2, ry) -> (cx, cy, w, h, ry), as bev::load_box.
at::Tensor xyxyr_to_xywhr(const at::Tensor& boxes) {
  const at::Tensor b = boxes.to(at::toOpMathType(boxes.scalar_type()));
  const at::Tensor x1 = b.select(1, 0), y1 = b.select(1, 1), x2 = b.select(1, 2), y2 = b.select(1, 3);
  return at::stack(
      {at::div(at::add(x1, x2), 2), at::div(at::add(y1, y2), 2), at::sub(x2, x1), at::sub(y2, y1), b.select(1, 4)}, 1);
}

} // namespace

at::Tensor nms_bev_any(const at::Tensor& boxes, const at::Tensor& scores, const NmsBevParams& p) {
  const int64_t n = boxes.size(0);
  at::Tensor keep;
  if (p.pre_max_size >= 0 && p.pre_max_size < n) {
    // The best pre_max_size boxes, already in score order: nms_rotated's
    // stable sort keeps that order, so its positions map back through it.
    const at::Tensor candidates = descending_score_order(scores).narrow(0, 0, p.pre_max_size);
    keep = candidates.index_select(0, mmops::nms_rotated(xyxyr_to_xywhr(boxes.index_select(0, candidates)),
                                                         scores.index_select(0, candidates), p.iou_threshold));
  } else {
    keep = mmops::nms_rotated(xyxyr_to_xywhr(boxes), scores, p.iou_threshold);
  }
  if (p.post_max_size >= 0 && p.post_max_size < keep.size(0)) {
    keep = keep.narrow(0, 0, p.post_max_size).clone();
  }
  return keep;
}

at::Tensor nms_normal_bev_any(const at::Tensor& boxes, const at::Tensor& scores, const NmsBevParams& p) {
  // The angle column is ignored: axis-aligned (x1, y1, x2, y2) boxes.
  return mmops::nms(boxes.narrow(1, 0, 4), scores, p.iou_threshold);
}

} // namespace kernels
} // namespace mmops
