#pragma once
// Device kernels of three_interpolate. Callers (src/three_interpolate)
// validate the arguments first; these functions only compute. An index
// outside [0, M) (possible on CUDA, where indices are not read on the host
// unless the strict switch is on) contributes nothing, forward and backward.

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {
namespace kernels {

// features [B, C, M], indices int32 [B, N, 3], weight [B, N, 3] (any strides)
// -> [B, C, N]: out[b, c, n] = sum_j weight[b, n, j] * features[b, c, indices[b, n, j]].
at::Tensor three_interpolate_forward_cpu(const at::Tensor& features, const at::Tensor& indices,
                                         const at::Tensor& weight);

// grad_output [B, C, N] -> (grad_features [B, C, M], grad_weight [B, N, 3]).
// Every sum runs in a fixed order (targets n, then j, ascending; channels
// ascending), the same on both devices: deterministic, no atomics.
std::tuple<at::Tensor, at::Tensor> three_interpolate_backward_cpu(const at::Tensor& grad_output,
                                                                  const at::Tensor& features, const at::Tensor& indices,
                                                                  const at::Tensor& weight);

#ifdef MMOPS_WITH_CUDA
at::Tensor three_interpolate_forward_cuda(const at::Tensor& features, const at::Tensor& indices,
                                          const at::Tensor& weight);
std::tuple<at::Tensor, at::Tensor> three_interpolate_backward_cuda(const at::Tensor& grad_output,
                                                                   const at::Tensor& features,
                                                                   const at::Tensor& indices, const at::Tensor& weight);
#endif

} // namespace kernels
} // namespace mmops
