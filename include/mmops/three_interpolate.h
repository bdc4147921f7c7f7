#pragma once
// Public C++ API of mmops::three_interpolate (through the PyTorch dispatcher).

#include <ATen/core/Tensor.h>

namespace mmops {

// mmcv three_interpolate. features [B, C, M], indices int32 [B, N, 3] (in
// [0, M)), weight [B, N, 3] in the dtype of features, one device. Returns
// [B, C, N]: out[b, c, n] = sum_j weight[b, n, j] * features[b, c, indices[b, n, j]].
// Differentiable w.r.t. features and weight (deterministic backward).
at::Tensor three_interpolate(const at::Tensor& features, const at::Tensor& indices, const at::Tensor& weight);

} // namespace mmops
