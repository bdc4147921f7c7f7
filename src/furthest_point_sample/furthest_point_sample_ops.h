#pragma once
// Internal to furthest_point_sample: the validation (furthest_point_sample_checks.cpp)
// shared by the device entries and the meta kernels, and the dispatcher
// signature of each schema.

#include "furthest_point_sample/furthest_point_sample_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

namespace mmops {

constexpr const char* kFpsOp = "mmops::furthest_point_sample: ";
constexpr const char* kFpsWithDistOp = "mmops::furthest_point_sample_with_dist: ";

namespace detail {

// points_xyz [B, N, 3] floating, 0 <= num_points < 2^31, num_points == 0 when
// N == 0; works on fake tensors.
void check_furthest_point_sample(const at::Tensor& points_xyz, const c10::SymInt& num_points);

// points_dist [B, N, N] floating, num_points as above.
void check_furthest_point_sample_with_dist(const at::Tensor& points_dist, const c10::SymInt& num_points);

} // namespace detail

// furthest_point_sample(Tensor points_xyz, SymInt num_points) -> Tensor
// furthest_point_sample_with_dist(Tensor points_dist, SymInt num_points) -> Tensor
using FurthestPointSampleFn = at::Tensor(const at::Tensor&, c10::SymInt);

} // namespace mmops
