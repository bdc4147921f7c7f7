#pragma once
// Device kernels of active_rotated_filter. Callers (src/active_rotated_filter)
// validate the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {

struct ActiveRotatedFilterParams {
  int64_t out_planes, in_planes, orientations, kernel_h, kernel_w, rotations;
  int64_t entries; // orientations * kernel_h * kernel_w (< 2^31)
};

namespace kernels {

// input [out_planes, in_planes, orientations, kH, kW], indices [orientations, kH, kW, rotations]
// (integral, 1-based) -> output [out_planes * rotations, in_planes * orientations, kH, kW].
at::Tensor active_rotated_filter_forward_cpu(const at::Tensor& input, const at::Tensor& indices,
                                             const ActiveRotatedFilterParams& params);

// Gradient [out_planes, in_planes, orientations, kH, kW] of input.
at::Tensor active_rotated_filter_backward_cpu(const at::Tensor& grad_output, const at::Tensor& indices,
                                              const ActiveRotatedFilterParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor active_rotated_filter_forward_cuda(const at::Tensor& input, const at::Tensor& indices,
                                              const ActiveRotatedFilterParams& params);

at::Tensor active_rotated_filter_backward_cuda(const at::Tensor& grad_output, const at::Tensor& indices,
                                               const ActiveRotatedFilterParams& params);
#endif

} // namespace kernels
} // namespace mmops
