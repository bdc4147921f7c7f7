#pragma once
// Device kernels of chamfer_distance. Callers (src/chamfer_distance) validate
// the arguments first; these functions only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

struct ChamferDistanceParams {
  int64_t batch, n, m; // xyz1 [batch, n, 2], xyz2 [batch, m, 2]; n, m < 2^31
};

namespace kernels {

// -> (dist1 [B, N], dist2 [B, M], idx1 [B, N] int32, idx2 [B, M] int32): the
// squared distance of every point to its nearest point of the other set and
// that point's index (the lowest index among equal distances).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> chamfer_distance_forward_cpu(
    const at::Tensor& xyz1, const at::Tensor& xyz2, const ChamferDistanceParams& params);

// -> (grad_xyz1, grad_xyz2). Indices outside [0, other count) contribute nothing.
std::tuple<at::Tensor, at::Tensor> chamfer_distance_backward_cpu(const at::Tensor& xyz1, const at::Tensor& xyz2,
                                                                 const at::Tensor& idx1, const at::Tensor& idx2,
                                                                 const at::Tensor& grad_dist1,
                                                                 const at::Tensor& grad_dist2,
                                                                 const ChamferDistanceParams& params);

#ifdef MMOPS_WITH_CUDA
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> chamfer_distance_forward_cuda(
    const at::Tensor& xyz1, const at::Tensor& xyz2, const ChamferDistanceParams& params);

std::tuple<at::Tensor, at::Tensor> chamfer_distance_backward_cuda(const at::Tensor& xyz1, const at::Tensor& xyz2,
                                                                  const at::Tensor& idx1, const at::Tensor& idx2,
                                                                  const at::Tensor& grad_dist1,
                                                                  const at::Tensor& grad_dist2,
                                                                  const ChamferDistanceParams& params);
#endif

} // namespace kernels
} // namespace mmops
