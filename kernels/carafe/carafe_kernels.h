#pragma once
// Device kernels of carafe. Callers (src/carafe) validate the arguments
// first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

struct CarafeParams {
  int64_t kernel_size;  // odd, 1..11
  int64_t group_size;   // divides the channels
  int64_t scale_factor; // >= 1
};

namespace kernels {

// output [N, C, H * s, W * s] of features [N, C, H, W] and masks [N, k * k * G, H * s, W * s].
at::Tensor carafe_forward_cpu(const at::Tensor& features, const at::Tensor& masks, const CarafeParams& params);

// (grad_features [N, C, H, W], grad_masks [N, k * k * G, H * s, W * s]).
std::tuple<at::Tensor, at::Tensor> carafe_backward_cpu(const at::Tensor& grad_output, const at::Tensor& features,
                                                       const at::Tensor& masks, const CarafeParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor carafe_forward_cuda(const at::Tensor& features, const at::Tensor& masks, const CarafeParams& params);

std::tuple<at::Tensor, at::Tensor> carafe_backward_cuda(const at::Tensor& grad_output, const at::Tensor& features,
                                                        const at::Tensor& masks, const CarafeParams& params);
#endif

} // namespace kernels
} // namespace mmops
