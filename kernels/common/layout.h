#pragma once
// Memory-layout helpers (one place for NCHW <-> NHWC).
// Host-only declarations; the CUDA transpose itself is in layout_cuda.cuh.

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// A CPU tensor contiguous in `format`: `input` itself when it already is.
// Between the NCHW and NHWC orders of a 4-D tensor this is a tiled transpose of
// each image's [C, H*W] matrix, parallel over tiles (ATen's generic strided
// copy is ~4x slower for this permutation); anything else is input.contiguous(format).
at::Tensor contiguous_cpu(const at::Tensor& input, at::MemoryFormat format);

#ifdef MMOPS_WITH_CUDA
// A 4-D CUDA tensor in channels-last memory order: `input` itself when it
// already is, else one transpose kernel on the current stream (ATen's generic
// copy is several times slower for this).
at::Tensor channels_last_cuda(const at::Tensor& input);
#endif

} // namespace kernels
} // namespace mmops
