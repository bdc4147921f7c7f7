// Argument validation of furthest_point_sample(_with_dist) (the meta kernels
// run it too).

#include "furthest_point_sample/furthest_point_sample_ops.h"

#include "common/check_utils.h"

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {
namespace {

// Shared by both ops: dtype, num_points in [0, 2^31) (int32 indices), points to pick from.
void check_common(const char* op, const char* name, const at::Tensor& data, const c10::SymInt& num_points) {
  TORCH_CHECK(at::isFloatingType(data.scalar_type()), op, "expected ", name,
              " to have a floating point dtype, but got ", data.scalar_type());
  TORCH_SYM_CHECK(num_points.sym_ge(0), op, "expected num_points >= 0, but got ", num_points);
  TORCH_SYM_CHECK(num_points.sym_le(std::numeric_limits<int32_t>::max()), op,
                  "expected num_points < 2^31 (the indices are int32), but got ", num_points);
  TORCH_SYM_CHECK(data.sym_size(1).sym_le(std::numeric_limits<int32_t>::max()), op, "expected N < 2^31 points in ",
                  name, " (the indices are int32), but got N = ", data.sym_size(1));
  TORCH_SYM_CHECK(data.sym_size(1).sym_gt(0).sym_or(num_points.sym_eq(0)), op, "expected num_points == 0 when ", name,
                  " holds no points (N == 0), but got num_points = ", num_points);
}

} // namespace

void check_furthest_point_sample(const at::Tensor& points_xyz, const c10::SymInt& num_points) {
  TORCH_CHECK(points_xyz.dim() == 3 && points_xyz.sym_size(2) == 3, kFpsOp,
              "expected points_xyz to be a 3-D tensor of shape [B, N, 3], but got shape ", shape_of(points_xyz));
  check_common(kFpsOp, "points_xyz", points_xyz, num_points);
}

void check_furthest_point_sample_with_dist(const at::Tensor& points_dist, const c10::SymInt& num_points) {
  TORCH_CHECK(points_dist.dim() == 3, kFpsWithDistOp,
              "expected points_dist to be a 3-D tensor of shape [B, N, N], but got shape ", shape_of(points_dist));
  TORCH_SYM_CHECK(points_dist.sym_size(1).sym_eq(points_dist.sym_size(2)), kFpsWithDistOp,
                  "expected points_dist to be a 3-D tensor of shape [B, N, N], but got shape ", shape_of(points_dist));
  check_common(kFpsWithDistOp, "points_dist", points_dist, num_points);
}

} // namespace detail
} // namespace mmops
