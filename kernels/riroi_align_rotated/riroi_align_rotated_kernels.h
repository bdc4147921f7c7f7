#pragma once
// Device kernels of riroi_align_rotated. Callers (src/riroi_align_rotated) validate the
// arguments first; these functions only compute. The shared rotated-bin
// geometry and kernel bodies are in kernels/common/rotated_roi*.

#include "common/rotated_roi.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mmops {
namespace kernels {

// output [K, C, PH, PW] (NCHW-contiguous).
at::Tensor riroi_align_rotated_forward_cpu(const at::Tensor& input, const at::Tensor& rois,
                                           const RotatedRoiParams& params);

// Gradient [N, C, H, W] (input_shape) of the input.
at::Tensor riroi_align_rotated_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois,
                                            const std::vector<int64_t>& input_shape, const RotatedRoiParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor riroi_align_rotated_forward_cuda(const at::Tensor& input, const at::Tensor& rois,
                                            const RotatedRoiParams& params);

at::Tensor riroi_align_rotated_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois,
                                             const std::vector<int64_t>& input_shape, const RotatedRoiParams& params);
#endif

} // namespace kernels
} // namespace mmops
