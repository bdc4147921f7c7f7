#pragma once
// Device kernels of gather_points, group_points and stack_group_points.
// Callers (src/group_points) validate the arguments first; these functions
// only compute. An index outside [0, N) (possible on CUDA, where indices are
// not read on the host) gathers 0 and receives no gradient.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {
namespace kernels {

// out[b, c, k] = features[b, c, indices[b, k]]: features [B, C, N], indices
// int32 [B, K] -> [B, C, K]. group_points is this with K = npoint * nsample.
at::Tensor gather_points_forward_cpu(const at::Tensor& features, const at::Tensor& indices);

// grad_features [B, C, n]: the sum of grad_output[b, c, k] (grad_output
// [B, C, K]) over the k with indices[b, k] == i, added in increasing k
// (deterministic; half/bfloat16 accumulate in float).
at::Tensor gather_points_backward_cpu(const at::Tensor& grad_output, const at::Tensor& indices, int64_t n);

// Stacked grouping: features [N1 + ..., C], features_batch_cnt int32 [B],
// indices int32 [M1 + ..., S] (relative to the first feature of their batch),
// indices_batch_cnt int32 [B] -> [M, C, S]; rows past the batches and indices
// outside their batch gather 0.
at::Tensor stack_group_points_forward_cpu(const at::Tensor& features, const at::Tensor& features_batch_cnt,
                                          const at::Tensor& indices, const at::Tensor& indices_batch_cnt);

// grad_features [n, C] of stack_group_points (grad_output [M, C, S]).
at::Tensor stack_group_points_backward_cpu(const at::Tensor& grad_output, const at::Tensor& features_batch_cnt,
                                           const at::Tensor& indices, const at::Tensor& indices_batch_cnt, int64_t n);

#ifdef MMOPS_WITH_CUDA
at::Tensor gather_points_forward_cuda(const at::Tensor& features, const at::Tensor& indices);
at::Tensor gather_points_backward_cuda(const at::Tensor& grad_output, const at::Tensor& indices, int64_t n);
at::Tensor stack_group_points_forward_cuda(const at::Tensor& features, const at::Tensor& features_batch_cnt,
                                           const at::Tensor& indices, const at::Tensor& indices_batch_cnt);
at::Tensor stack_group_points_backward_cuda(const at::Tensor& grad_output, const at::Tensor& features_batch_cnt,
                                            const at::Tensor& indices, const at::Tensor& indices_batch_cnt, int64_t n);
#endif

} // namespace kernels
} // namespace mmops
