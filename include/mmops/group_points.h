#pragma once
// Public C++ API of mmops::gather_points, group_points and stack_group_points
// (through the PyTorch dispatcher). Differentiable in features; the indices
// are int32 as in mmcv. An index outside its range is an error on CPU; CUDA
// kernels gather 0 for it (docs/indices.md).

#include <ATen/core/Tensor.h>

namespace mmops {

// mmcv gather_points: features [B, C, N], indices [B, M] -> [B, C, M],
// out[b, c, m] = features[b, c, indices[b, m]].
at::Tensor gather_points(const at::Tensor& features, const at::Tensor& indices);

// mmcv grouping_operation: features [B, C, N], indices [B, npoint, nsample]
// -> [B, C, npoint, nsample].
at::Tensor group_points(const at::Tensor& features, const at::Tensor& indices);

// mmcv grouping_operation on stacked batches: features [N1 + N2 + ..., C],
// features_batch_cnt [B] (N1, N2, ...), indices [M1 + M2 + ..., nsample]
// relative to the first feature of their batch, indices_batch_cnt [B]
// (M1, M2, ...) -> [M1 + M2 + ..., C, nsample].
at::Tensor stack_group_points(const at::Tensor& features, const at::Tensor& features_batch_cnt,
                              const at::Tensor& indices, const at::Tensor& indices_batch_cnt);

} // namespace mmops
