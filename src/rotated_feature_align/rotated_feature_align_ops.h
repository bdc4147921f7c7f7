#pragma once
// Internal to rotated_feature_align: the validation (rotated_feature_align_checks.cpp),
// shared by the device entries and the meta kernels, and the dispatcher
// signature of each schema (for detail::op_handle).

#include "rotated_feature_align/rotated_feature_align_kernels.h"

#include <ATen/core/Tensor.h>

namespace mmops {

// The prefix of every rotated_feature_align error message.
constexpr const char* kRotatedFeatureAlignOp = "mmops::rotated_feature_align: ";

namespace detail {

// Every argument of a forward call (features [N, C, H, W], best_rbboxes [N, H, W, 5]);
// works on real and fake tensors.
RotatedFeatureAlignParams check_rotated_feature_align_forward(const at::Tensor& features,
                                                              const at::Tensor& best_rbboxes, double spatial_scale,
                                                              int64_t points);

// The arguments of a backward call (grad_output has the shape of features).
RotatedFeatureAlignParams check_rotated_feature_align_backward(const at::Tensor& grad_output,
                                                               const at::Tensor& best_rbboxes, double spatial_scale,
                                                               int64_t points);

} // namespace detail

// rotated_feature_align(Tensor features, Tensor best_rbboxes, float spatial_scale=0.125, int points=1) -> Tensor
using RotatedFeatureAlignFn = at::Tensor(const at::Tensor&, const at::Tensor&, double, int64_t);

// _rotated_feature_align_backward(Tensor grad_output, Tensor best_rbboxes, float spatial_scale, int points)
//     -> Tensor
using RotatedFeatureAlignBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, double, int64_t);

} // namespace mmops
