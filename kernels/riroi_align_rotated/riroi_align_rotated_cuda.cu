// CUDA kernels of riroi_align_rotated: the shared rotated RoIAlign kernels
// (common/rotated_roi_cuda.cuh, design notes there) with this op's parameters.

#include "riroi_align_rotated/riroi_align_rotated_kernels.h"

#include "common/rotated_roi_cuda.cuh"

namespace mmops {
namespace kernels {

at::Tensor riroi_align_rotated_forward_cuda(const at::Tensor& input, const at::Tensor& rois,
                                            const RotatedRoiParams& params) {
  return rotated_roi_cuda::forward(input, rois, params, "mmops::riroi_align_rotated (CUDA)");
}

at::Tensor riroi_align_rotated_backward_cuda(const at::Tensor& grad_output, const at::Tensor& rois,
                                             const std::vector<int64_t>& input_shape, const RotatedRoiParams& params) {
  return rotated_roi_cuda::backward(grad_output, rois, input_shape, params,
                                    "mmops::riroi_align_rotated backward (CUDA)");
}

} // namespace kernels
} // namespace mmops
