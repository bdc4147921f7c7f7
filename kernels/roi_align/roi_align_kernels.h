#pragma once
// Device kernels of roi_align and multi_level_roi_align. Callers
// (src/roi_align) validate the arguments first; these functions only compute.
// roi_align is the one-level case: every roi pools from features[0].

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>
#include <vector>

namespace mmops {

enum class PoolMode { Avg, Max };

constexpr int kMaxLevels = 8;

// Plain data, passed by value to the CUDA kernels.
struct RoIAlignParams {
  int64_t pooled_height;
  int64_t pooled_width;
  int64_t sampling_ratio;
  PoolMode pool_mode;
  bool aligned;
  int num_levels;                   // feature maps; each roi pools from one
  double spatial_scale[kMaxLevels]; // of each feature map
  double finest_scale;              // level mapping (see roi_level); unused for one level
};

namespace kernels {

// Returns (output [K, C, PH, PW], argmax). argmax holds, in max mode and when
// `with_argmax`, the winning sample index of each output (int32, -1 for none);
// otherwise it is an empty int32 tensor. All features share N, C and dtype.
std::tuple<at::Tensor, at::Tensor> roi_align_forward_cpu(at::TensorList features, const at::Tensor& rois,
                                                         const RoIAlignParams& params, bool with_argmax);

// One gradient per feature map, NCHW; feature_shapes[l] = [N, C, H_l, W_l].
std::vector<at::Tensor> roi_align_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois,
                                               const at::Tensor& argmax,
                                               const std::vector<std::vector<int64_t>>& feature_shapes,
                                               const RoIAlignParams& params);

#ifdef MMOPS_WITH_CUDA
std::tuple<at::Tensor, at::Tensor> roi_align_forward_cuda(at::TensorList features, const at::Tensor& rois,
                                                          const RoIAlignParams& params, bool with_argmax);

std::vector<at::Tensor> roi_align_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois,
                                                const at::Tensor& argmax,
                                                const std::vector<std::vector<int64_t>>& feature_shapes,
                                                const RoIAlignParams& params);
#endif

} // namespace kernels
} // namespace mmops
