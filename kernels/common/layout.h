#pragma once
// Memory-layout helpers of the CUDA kernels (one place for NCHW <-> NHWC).
// Host-only declarations; the templated transpose itself is in layout_cuda.cuh.

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

#ifdef MMOPS_WITH_CUDA
// A 4-D CUDA tensor in channels-last memory order: `input` itself when it
// already is, else one transpose kernel on the current stream (ATen's generic
// copy is several times slower for this).
at::Tensor channels_last_cuda(const at::Tensor& input);
#endif

} // namespace kernels
} // namespace mmops
