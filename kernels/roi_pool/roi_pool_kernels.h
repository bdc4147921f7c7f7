#pragma once
// Device kernels of roi_pool. Callers (src/roi_pool) validate the arguments
// first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>
#include <vector>

namespace mmops {

struct RoIPoolParams {
  int64_t pooled_height;
  int64_t pooled_width;
  double spatial_scale;
};

namespace kernels {

// Returns (output [K, C, PH, PW], argmax). When `with_argmax`, argmax holds the
// winning pixel h * W + w of each output (int32, -1 for an empty bin or a roi
// that pools zeros), channels-last ([K, PH, PW, C] in memory: the CUDA
// backward reads a bin's channels together); otherwise an empty int32 tensor.
std::tuple<at::Tensor, at::Tensor> roi_pool_forward_cpu(const at::Tensor& input, const at::Tensor& rois,
                                                        const RoIPoolParams& params, bool with_argmax);

// Gradient [N, C, H, W] (input_shape) of the input.
at::Tensor roi_pool_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                                 const std::vector<int64_t>& input_shape, const RoIPoolParams& params);

#ifdef MMOPS_WITH_CUDA
std::tuple<at::Tensor, at::Tensor> roi_pool_forward_cuda(const at::Tensor& input, const at::Tensor& rois,
                                                         const RoIPoolParams& params, bool with_argmax);

at::Tensor roi_pool_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
                                  const std::vector<int64_t>& input_shape, const RoIPoolParams& params);
#endif

} // namespace kernels
} // namespace mmops
