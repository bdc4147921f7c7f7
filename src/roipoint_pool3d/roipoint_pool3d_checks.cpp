// Argument validation of roipoint_pool3d (the meta kernel runs it too).

#include "roipoint_pool3d/roipoint_pool3d_ops.h"

#include "common/check_utils.h"

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {

void check_roipoint_pool3d(const at::Tensor& points, const at::Tensor& point_features, const at::Tensor& boxes3d,
                           const c10::SymInt& num_sampled_points) {
  constexpr const char* kOp = kRoIPointPool3dOp;
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(points.dim() == 3 && points.sym_size(2) == 3, kOp,
              "expected points to be a 3-D tensor of shape [B, N, 3] (x, y, z), but got shape ", shape_of(points));
  TORCH_CHECK(point_features.dim() == 3, kOp, "expected point_features to be a 3-D tensor [B, N, C], but got shape ",
              shape_of(point_features));
  TORCH_SYM_CHECK(point_features.sym_size(0)
                      .sym_eq(points.sym_size(0))
                      .sym_and(point_features.sym_size(1).sym_eq(points.sym_size(1))),
                  kOp, "expected point_features to start with the [B, N] of points (", shape_of(points),
                  "), but got shape ", shape_of(point_features));
  TORCH_CHECK(boxes3d.dim() == 3 && boxes3d.sym_size(2) == 7, kOp,
              "expected boxes3d to be a 3-D tensor of shape [B, M, 7] (x, y, z, dx, dy, dz, rz), but got shape ",
              shape_of(boxes3d));
  TORCH_SYM_CHECK(boxes3d.sym_size(0).sym_eq(points.sym_size(0)), kOp,
                  "expected boxes3d to have the batch size of points (", points.sym_size(0), "), but got ",
                  boxes3d.sym_size(0));
  TORCH_CHECK(at::isFloatingType(points.scalar_type()), kOp, "expected points to have a floating point dtype, but got ",
              points.scalar_type());
  TORCH_CHECK(point_features.scalar_type() == points.scalar_type() && boxes3d.scalar_type() == points.scalar_type(),
              kOp, "expected point_features and boxes3d to have the dtype of points (", points.scalar_type(),
              "), but got ", point_features.scalar_type(), " and ", boxes3d.scalar_type());
  TORCH_CHECK(point_features.device() == points.device() && boxes3d.device() == points.device(), kOp,
              "expected point_features and boxes3d on the device of points (", points.device(), "), but got ",
              point_features.device(), " and ", boxes3d.device());
  TORCH_SYM_CHECK(points.sym_size(1).sym_le(kInt32Max), kOp,
                  "expected fewer than 2^31 points per batch (point indices are int32), but got ", points.sym_size(1));
  TORCH_SYM_CHECK(num_sampled_points.sym_ge(1).sym_and(num_sampled_points.sym_le(kInt32Max)), kOp,
                  "num_sampled_points must be in [1, 2^31 - 1], but got ", num_sampled_points);
  const auto b = points.sym_size(0).maybe_as_int(), m = boxes3d.sym_size(1).maybe_as_int();
  const auto s = num_sampled_points.maybe_as_int(), c = point_features.sym_size(2).maybe_as_int();
  if (b && m && s && c) {
    checked_product(kOp, "the output [B, M, num_sampled_points, 3 + C]: its element count", {*b, *m, *s, 3 + *c});
  }
}

} // namespace detail
} // namespace mmops
