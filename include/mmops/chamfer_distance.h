#pragma once
// Public C++ API of mmops::chamfer_distance (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {

// 2-D chamfer distance with mmcv's conventions:
//   xyz1 [B, N, 2], xyz2 [B, M, 2] floating point (same dtype and device; N and
//   M both zero or both positive)
//   -> (dist1 [B, N], dist2 [B, M], idx1 [B, N] int32, idx2 [B, M] int32):
//   dist1[b, i] is the squared distance of xyz1[b, i] to its nearest point
//   xyz2[b, idx1[b, i]] (dist2 / idx2 the other way). Among equal distances the
//   lowest index wins; a NaN distance loses to every number. Differentiable
//   w.r.t. xyz1 and xyz2 through dist1 and dist2.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> chamfer_distance(const at::Tensor& xyz1,
                                                                            const at::Tensor& xyz2);

} // namespace mmops
