#pragma once
// Device kernels of roi_align. Callers (src/roi_align) validate the arguments
// first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

enum class PoolMode { Avg, Max };

struct RoIAlignParams {
  int64_t pooled_height;
  int64_t pooled_width;
  double spatial_scale;
  int64_t sampling_ratio;
  PoolMode pool_mode;
  bool aligned;
};

namespace kernels {

// Returns (output [K, C, PH, PW], argmax). argmax holds, in max mode and when
// `with_argmax`, the winning sample index of each output (int32, -1 for none);
// otherwise it is an empty int32 tensor.
std::tuple<at::Tensor, at::Tensor> roi_align_forward_cpu(
    const at::Tensor& input, const at::Tensor& rois, const RoIAlignParams& params, bool with_argmax);

at::Tensor roi_align_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
    at::IntArrayRef input_shape, const RoIAlignParams& params);

#ifdef MMOPS_WITH_CUDA
std::tuple<at::Tensor, at::Tensor> roi_align_forward_cuda(
    const at::Tensor& input, const at::Tensor& rois, const RoIAlignParams& params, bool with_argmax);

at::Tensor roi_align_backward_cuda(
    const at::Tensor& grad_output, const at::Tensor& rois, const at::Tensor& argmax,
    at::IntArrayRef input_shape, const RoIAlignParams& params);

// True while the current CUDA stream is capturing a graph (no sync allowed).
bool current_cuda_stream_is_capturing();
#endif

} // namespace kernels
} // namespace mmops
