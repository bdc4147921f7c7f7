#pragma once
// Public C++ API of mmops::pixel_group (through the dispatcher).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

// PAN's pixel aggregation (mmcv.ops.pixel_group), as tensors:
//   score:             [H, W] floating, the text score
//   mask:              [H, W] bool or uint8, the text region
//   embedding:         [H, W, C], score's dtype, the similarity vectors
//   kernel_label:      [H, W] int32, the kernels' components: 0 (background) or in
//                      [1, kernel_region_num); an error outside on CPU, read as 0 on CUDA
//   kernel_contour:    [H, W] bool or uint8, the kernels' contour pixels (the seeds)
//   distance_threshold: a pixel joins a kernel when its squared embedding distance
//                      to the kernel's mean embedding is < distance_threshold^2
// Returns (labels [H, W] int32, the grown kernel labels; scores [R], the mean
// score of each label's pixels, score's dtype; counts [R] int64, each label's
// pixel count), label 0 with score 0 and count 0. Rounded as mmcv's float32
// kernel. Not differentiable. See docs/ops/pixel_group.md.
std::tuple<at::Tensor, at::Tensor, at::Tensor> pixel_group(const at::Tensor& score, const at::Tensor& mask,
                                                           const at::Tensor& embedding, const at::Tensor& kernel_label,
                                                           const at::Tensor& kernel_contour, int64_t kernel_region_num,
                                                           double distance_threshold);

} // namespace mmops
