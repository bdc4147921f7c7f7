#pragma once
// Device kernels of convex_iou and convex_giou. Callers (src/convex_iou)
// validate the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {
namespace kernels {

// [N, K] IoU of each point set's hull (pointsets [N, 18]) with each
// quadrilateral (polygons [K, 8]), in pointsets' dtype; computed in float
// (double for double). Any strides.
at::Tensor convex_iou_cpu(const at::Tensor& pointsets, const at::Tensor& polygons);

// (giou [N], d giou / d pointsets [N, 18]) for pointsets [N, 18] and
// polygons [N, 8], row with row.
std::tuple<at::Tensor, at::Tensor> convex_giou_cpu(const at::Tensor& pointsets, const at::Tensor& polygons);

#ifdef MMOPS_WITH_CUDA
at::Tensor convex_iou_cuda(const at::Tensor& pointsets, const at::Tensor& polygons);
std::tuple<at::Tensor, at::Tensor> convex_giou_cuda(const at::Tensor& pointsets, const at::Tensor& polygons);
#endif

} // namespace kernels
} // namespace mmops
