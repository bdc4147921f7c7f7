#pragma once
// Device kernels of the BEV ops of mmcv's iou3d: boxes_overlap_bev,
// boxes_iou_bev, nms_bev and nms_normal_bev. Callers (src/iou3d) validate the
// arguments first; these functions only compute.

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace mmops {

struct BevOverlapParams {
  bool xyxyr; // [*, 5] (x1, y1, x2, y2, ry); else [*, 7] (x, y, z, dx, dy, dz, heading)
  bool iou;   // intersection over union; else the intersection area
};

struct NmsBevParams {
  double iou_threshold;
  int64_t pre_max_size;  // boxes considered, the best by score; -1: all
  int64_t post_max_size; // kept indices returned, the first; -1: all
};

namespace kernels {

// [N, M] for boxes_a [N, *] and boxes_b [M, *] (symbolic in the meta kernel).
inline std::vector<c10::SymInt> bev_overlaps_shape(const at::Tensor& boxes_a, const at::Tensor& boxes_b) {
  return {boxes_a.sym_size(0), boxes_b.sym_size(0)};
}

// All pairs' overlap in the boxes' dtype, computed in float (double for double).
at::Tensor bev_overlaps_cpu(const at::Tensor& boxes_a, const at::Tensor& boxes_b, const BevOverlapParams& p);

#ifdef MMOPS_WITH_CUDA
at::Tensor bev_overlaps_cuda(const at::Tensor& boxes_a, const at::Tensor& boxes_b, const BevOverlapParams& p);
#endif

// Kept indices, int64, by decreasing score. Any device: the boxes are
// converted with plain ATen ops and suppressed by mmops::nms_rotated (nms_bev)
// or mmops::nms (nms_normal_bev) through the dispatcher.
at::Tensor nms_bev_any(const at::Tensor& boxes, const at::Tensor& scores, const NmsBevParams& p);
at::Tensor nms_normal_bev_any(const at::Tensor& boxes, const at::Tensor& scores, const NmsBevParams& p);

} // namespace kernels
} // namespace mmops
