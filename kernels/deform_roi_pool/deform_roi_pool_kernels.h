#pragma once
// Device kernels of deform_roi_pool. Callers (src/deform_roi_pool) validate
// the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <tuple>

namespace mmops {

// Plain data, passed by value to the CUDA kernels.
struct DeformRoIPoolParams {
  int64_t pooled_height;
  int64_t pooled_width;
  double spatial_scale;
  int64_t sampling_ratio; // 0: adaptive
  double gamma;           // scale of the offsets (in roi sizes)
};

namespace kernels {

// output [K, C, PH, PW] (NCHW) from input [N, C, H, W], rois [K, 5] and the
// optional offset [K, 2, PH, PW] (x shift, y shift), all of one dtype.
at::Tensor deform_roi_pool_forward_cpu(const at::Tensor& input, const at::Tensor& rois,
                                       const std::optional<at::Tensor>& offset, const DeformRoIPoolParams& params);

// (grad_input [N, C, H, W], grad_offset [K, 2, PH, PW], or an empty [0] tensor
// without offset).
std::tuple<at::Tensor, at::Tensor> deform_roi_pool_backward_cpu(const at::Tensor& grad_output, const at::Tensor& input,
                                                                const at::Tensor& rois,
                                                                const std::optional<at::Tensor>& offset,
                                                                const DeformRoIPoolParams& params);

#ifdef MMOPS_WITH_CUDA
at::Tensor deform_roi_pool_forward_cuda(const at::Tensor& input, const at::Tensor& rois,
                                        const std::optional<at::Tensor>& offset, const DeformRoIPoolParams& params);

std::tuple<at::Tensor, at::Tensor> deform_roi_pool_backward_cuda(const at::Tensor& grad_output, const at::Tensor& input,
                                                                 const at::Tensor& rois,
                                                                 const std::optional<at::Tensor>& offset,
                                                                 const DeformRoIPoolParams& params);
#endif

} // namespace kernels
} // namespace mmops
