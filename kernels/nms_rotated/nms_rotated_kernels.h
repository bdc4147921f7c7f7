#pragma once
// Device kernels of nms_rotated and nms_quadri. Callers (src/nms_rotated)
// validate the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

namespace mmops {

struct NmsRotatedParams {
  double iou_threshold;
  bool clockwise; // false: angles negated (rotated boxes only)
  bool quadri;    // [N, 8] quadrilaterals instead of [N, 5] rotated boxes
};

namespace kernels {

// labels as int64 keys that are equal exactly when the labels are equal
// (floating labels: their bits, -0 folded into +0); undefined stays undefined.
at::Tensor label_keys(const at::Tensor& labels);

// Kept indices, int64, by decreasing score. labels: undefined, or [N].
at::Tensor nms_rotated_cpu(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& labels,
                           const NmsRotatedParams& p);

#ifdef MMOPS_WITH_CUDA
at::Tensor nms_rotated_cuda(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& labels,
                            const NmsRotatedParams& p);
#endif

} // namespace kernels
} // namespace mmops
