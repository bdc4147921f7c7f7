#pragma once
// Public C++ API of mmops::contour_expand (through the dispatcher).

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {

// PSENet's scale expansion (mmcv.ops.contour_expand), as a label map:
//   kernel_mask:           [K, H, W] uint8 or bool, the K text kernels, largest first
//   internal_kernel_label: [H, W] int32, labels in [0, kernel_num] of the smallest
//                          kernel's components (0: background); an error outside
//                          on CPU, read as 0 on CUDA
//   min_kernel_area:       labels covering fewer pixels are dropped
//   progressive:           false: mmcv's result, one breadth-first flood into
//                          kernel_mask[0] (when K >= 2); true: PSENet's rounds into
//                          kernel_mask[K - 2], ..., kernel_mask[0]
// Returns the int32 [H, W] label map. Not differentiable. See docs/ops/contour_expand.md.
at::Tensor contour_expand(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                          int64_t min_kernel_area, int64_t kernel_num, bool progressive = false);

} // namespace mmops
