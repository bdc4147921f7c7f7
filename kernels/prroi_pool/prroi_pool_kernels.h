#pragma once
// Device kernels of prroi_pool. Callers (src/prroi_pool) validate the
// arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mmops {

struct PrRoIPoolParams {
  int64_t pooled_height;
  int64_t pooled_width;
  double spatial_scale;
};

namespace kernels {

// input [N, C, H, W], rois [K, 5] -> output [K, C, PH, PW]: the mean of the
// bilinearly interpolated map over each bin (prroi_pool_math.h).
at::Tensor prroi_pool_forward_cpu(const at::Tensor& input, const at::Tensor& rois, const PrRoIPoolParams& params);

// The gradient [N, C, H, W] (input_shape) of input.
at::Tensor prroi_pool_input_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois,
                                         const std::vector<int64_t>& input_shape, const PrRoIPoolParams& params);

// The gradient [K, 5] of rois: column 0 (the batch index) is 0.
at::Tensor prroi_pool_rois_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& rois,
                                        const PrRoIPoolParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor prroi_pool_forward_cuda(const at::Tensor& input, const at::Tensor& rois, const PrRoIPoolParams& params);

at::Tensor prroi_pool_input_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois,
                                          const std::vector<int64_t>& input_shape, const PrRoIPoolParams& params);

at::Tensor prroi_pool_rois_backward_cuda(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& rois,
                                         const PrRoIPoolParams& params);
#endif

} // namespace kernels
} // namespace mmops
