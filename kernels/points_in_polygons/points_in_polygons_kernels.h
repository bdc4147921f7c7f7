#pragma once
// Device kernels of points_in_polygons. Callers (src/points_in_polygons)
// validate the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// [N, M] of 1.0 (inside) / 0.0 (outside) in points' dtype, for points [N, 2]
// and polygons [M, 8] (any strides); computed in float (double for double).
at::Tensor points_in_polygons_cpu(const at::Tensor& points, const at::Tensor& polygons);

#ifdef MMOPS_WITH_CUDA
at::Tensor points_in_polygons_cuda(const at::Tensor& points, const at::Tensor& polygons);
#endif

} // namespace kernels
} // namespace mmops
