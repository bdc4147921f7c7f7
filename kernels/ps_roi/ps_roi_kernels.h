#pragma once
// Device kernels of ps_roi_align and ps_roi_pool. Callers (src/ps_roi)
// validate the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mmops {

struct PSRoIParams {
  int64_t pooled_height;
  int64_t pooled_width;
  int64_t channels_out; // input channels / (pooled_height * pooled_width)
  double spatial_scale;
  int64_t sampling_ratio; // ps_roi_align only: samples per bin side, <= 0 adaptive
};

namespace kernels {

// Output [K, C_out, PH, PW]: bin (ph, pw) of output channel c reads input
// channel (c * PH + ph) * PW + pw.
at::Tensor ps_roi_align_forward_cpu(const at::Tensor& input, const at::Tensor& rois, const PSRoIParams& params);
at::Tensor ps_roi_pool_forward_cpu(const at::Tensor& input, const at::Tensor& rois, const PSRoIParams& params);

// Gradient [N, C, H, W] (input_shape) of the input; the channel of every
// output is recomputed from its position (no saved mapping).
at::Tensor ps_roi_align_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois,
                                     const std::vector<int64_t>& input_shape, const PSRoIParams& params);
at::Tensor ps_roi_pool_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois,
                                    const std::vector<int64_t>& input_shape, const PSRoIParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor ps_roi_align_forward_cuda(const at::Tensor& input, const at::Tensor& rois, const PSRoIParams& params);
at::Tensor ps_roi_pool_forward_cuda(const at::Tensor& input, const at::Tensor& rois, const PSRoIParams& params);
at::Tensor ps_roi_align_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois,
                                      const std::vector<int64_t>& input_shape, const PSRoIParams& params);
at::Tensor ps_roi_pool_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois,
                                     const std::vector<int64_t>& input_shape, const PSRoIParams& params);
#endif

} // namespace kernels
} // namespace mmops
