// CPU kernels of riroi_align_rotated: the shared rotated RoIAlign loops
// (common/rotated_roi_cpu.h) with this op's parameters.

#include "riroi_align_rotated/riroi_align_rotated_kernels.h"

#include "common/rotated_roi_cpu.h"

namespace mmops {
namespace kernels {

at::Tensor riroi_align_rotated_forward_cpu(const at::Tensor& input, const at::Tensor& rois,
                                           const RotatedRoiParams& params) {
  return rotated_roi_cpu::forward(input, rois, params);
}

at::Tensor riroi_align_rotated_backward_cpu(const at::Tensor& grad_output, const at::Tensor& rois,
                                            const std::vector<int64_t>& input_shape, const RotatedRoiParams& params) {
  return rotated_roi_cpu::backward(grad_output, rois, input_shape, params);
}

} // namespace kernels
} // namespace mmops
