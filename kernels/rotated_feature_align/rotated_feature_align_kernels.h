#pragma once
// Device kernels of rotated_feature_align. Callers (src/rotated_feature_align)
// validate the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {

struct RotatedFeatureAlignParams {
  double spatial_scale;
  int64_t points; // 1 or 5
};

namespace kernels {

// features [N, C, H, W] + the bilinear samples at each pixel's rbox points.
// The output takes features.suggest_memory_format().
at::Tensor rotated_feature_align_forward_cpu(const at::Tensor& features, const at::Tensor& best_rbboxes,
                                             const RotatedFeatureAlignParams& params);

// Gradient [N, C, H, W] of features, in grad_output.suggest_memory_format().
at::Tensor rotated_feature_align_backward_cpu(const at::Tensor& grad_output, const at::Tensor& best_rbboxes,
                                              const RotatedFeatureAlignParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor rotated_feature_align_forward_cuda(const at::Tensor& features, const at::Tensor& best_rbboxes,
                                              const RotatedFeatureAlignParams& params);

at::Tensor rotated_feature_align_backward_cuda(const at::Tensor& grad_output, const at::Tensor& best_rbboxes,
                                               const RotatedFeatureAlignParams& params);
#endif

} // namespace kernels
} // namespace mmops
