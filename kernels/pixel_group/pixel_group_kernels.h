#pragma once
// Device kernels of pixel_group (PAN's pixel aggregation, mmcv's pixel_group).
// Callers (src/pixel_group) validate the arguments first; these functions only
// compute.

#include "pixel_group/pixel_group_math.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

struct PixelGroupParams {
  int64_t kernel_region_num; // R: labels lie in [0, R)
  double distance_threshold;
};

namespace kernels {

// score [H, W] and embedding [H, W, C] floating (one dtype; float16 / bfloat16
// compute in float32), mask [H, W] bool, kernel_label [H, W] int32 with values in
// [0, R) (the CPU kernel relies on it; the CUDA kernel reads a value outside as
// 0), kernel_contour [H, W] uint8 or bool. Returns
//   labels [H, W] int32: kernel_label grown by the FIFO flood from the contour
//     pixels with a label > 0 (raster order; none when C == 0, as mmcv), a
//     popped pixel of label l claiming each unlabelled masked neighbour, in the
//     order (col - 1), (col + 1), (row - 1), (row + 1), whose squared embedding
//     distance to l's mean kernel embedding is below distance_threshold^2;
//   scores [R] (score's dtype): the mean score of each label's pixels (0 for
//     label 0 and empty labels), summed in raster order;
//   counts [R] int64: each label's pixel count (0 for label 0).
// Sums and distances are rounded as mmcv's float32 kernel rounds them
// (pixel_group_math.h); float64 inputs compute in float64.
std::tuple<at::Tensor, at::Tensor, at::Tensor> pixel_group_cpu(const at::Tensor& score, const at::Tensor& mask,
                                                               const at::Tensor& embedding,
                                                               const at::Tensor& kernel_label,
                                                               const at::Tensor& kernel_contour,
                                                               const PixelGroupParams& params);

#ifdef MMOPS_WITH_CUDA
std::tuple<at::Tensor, at::Tensor, at::Tensor> pixel_group_cuda(const at::Tensor& score, const at::Tensor& mask,
                                                                const at::Tensor& embedding,
                                                                const at::Tensor& kernel_label,
                                                                const at::Tensor& kernel_contour,
                                                                const PixelGroupParams& params);
#endif

} // namespace kernels
} // namespace mmops
