#pragma once
// Internal to three_interpolate: the validation (three_interpolate_checks.cpp),
// shared by the device entries and the meta kernels, and the dispatcher
// signature of each schema.

#include "three_interpolate/three_interpolate_kernels.h"

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {

constexpr const char* kThreeInterpolateOp = "mmops::three_interpolate: ";

namespace detail {

// features [B, C, M] floating; indices int32 [B, N, 3]; weight [B, N, 3] in
// the dtype of features; one device. Works on fake tensors.
void check_three_interpolate(const at::Tensor& features, const at::Tensor& indices, const at::Tensor& weight);

// The forward's arguments, and grad_output [B, C, N] in their dtype and device.
void check_three_interpolate_backward(const at::Tensor& grad_output, const at::Tensor& features,
                                      const at::Tensor& indices, const at::Tensor& weight);

// indices' data in [0, M) (CPU always, CUDA in strict mode; see
// common/index_policy.h).
void check_three_interpolate_indices(const at::Tensor& indices, int64_t m);

} // namespace detail

// three_interpolate(Tensor features, Tensor indices, Tensor weight) -> Tensor
using ThreeInterpolateFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&);

// _three_interpolate_backward(Tensor grad_output, Tensor features, Tensor indices, Tensor weight)
//     -> (Tensor grad_features, Tensor grad_weight)
using ThreeInterpolateBackwardFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                      const at::Tensor&, const at::Tensor&);

} // namespace mmops
