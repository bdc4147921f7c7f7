#pragma once
// Device kernels of points_in_boxes_part / points_in_boxes_all. Callers
// (src/points_in_boxes) validate the arguments first; these only compute.
// The geometry (kernels/common/box3d.h) runs in float (double for double).

#include <ATen/core/Tensor.h>

namespace mmops {
namespace kernels {

// int32 [B, N]: for points [B, N, 3] and boxes [B, M, 7] (any strides), the
// index of the first box (lowest index) of the same batch that contains the
// point, -1 if none.
at::Tensor points_in_boxes_part_cpu(const at::Tensor& points, const at::Tensor& boxes);

// int32 [B, N, M]: 1 where box m of the batch contains point n, else 0.
at::Tensor points_in_boxes_all_cpu(const at::Tensor& points, const at::Tensor& boxes);

#ifdef MMOPS_WITH_CUDA
at::Tensor points_in_boxes_part_cuda(const at::Tensor& points, const at::Tensor& boxes);
at::Tensor points_in_boxes_all_cuda(const at::Tensor& points, const at::Tensor& boxes);
#endif

} // namespace kernels
} // namespace mmops
