#pragma once
// Device kernels of min_area_polygons. Callers (src/min_area_polygons)
// validate the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// [N, 8] corners of each set's minimum-area rectangle, in pointsets' dtype;
// computed in float (double for double). pointsets: [N, 18], any strides.
at::Tensor min_area_polygons_cpu(const at::Tensor& pointsets);

#ifdef MMOPS_WITH_CUDA
at::Tensor min_area_polygons_cuda(const at::Tensor& pointsets);
#endif

} // namespace kernels
} // namespace mmops
