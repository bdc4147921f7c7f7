#pragma once
// Device kernels of box_iou_rotated and box_iou_quadri. Callers
// (src/box_iou_rotated) validate the arguments first; these functions only
// compute.

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <cstdint>
#include <vector>

namespace mmops {

struct BoxIouRotatedParams {
  bool iof;       // mode "iof": intersection over the area of boxes1's box
  bool aligned;   // row i of boxes1 with row i of boxes2 only
  bool clockwise; // false: angles are negated (rotated boxes only)
  bool quadri;    // [*, 8] quadrilaterals instead of [*, 5] rotated boxes
};

namespace kernels {

// [N, M], or [N] when aligned (symbolic in the meta kernel).
inline std::vector<c10::SymInt> rotated_overlaps_shape(const at::Tensor& boxes1, const at::Tensor& boxes2,
                                                       bool aligned) {
  if (aligned) {
    return {boxes1.sym_size(0)};
  }
  return {boxes1.sym_size(0), boxes2.sym_size(0)};
}

// Overlaps in the boxes' dtype, computed in float (double for double).
at::Tensor box_iou_rotated_cpu(const at::Tensor& boxes1, const at::Tensor& boxes2, const BoxIouRotatedParams& p);

#ifdef MMOPS_WITH_CUDA
at::Tensor box_iou_rotated_cuda(const at::Tensor& boxes1, const at::Tensor& boxes2, const BoxIouRotatedParams& p);
#endif

} // namespace kernels
} // namespace mmops
