// Argument validation of points_in_polygons (the meta kernel runs it too).

#include "common/check_utils.h"
#include "points_in_polygons/points_in_polygons_ops.h"

#include <c10/core/ScalarType.h>

namespace mmops {
namespace detail {

void check_points_in_polygons(const at::Tensor& points, const at::Tensor& polygons) {
  constexpr const char* kOp = kPointsInPolygonsOp;
  TORCH_CHECK(points.dim() == 2 && points.sym_size(1) == 2, kOp,
              "expected points to be a 2-D tensor of shape [N, 2] (x, y), but got shape ", shape_of(points));
  TORCH_CHECK(polygons.dim() == 2 && polygons.sym_size(1) == 8, kOp,
              "expected polygons to be a 2-D tensor of shape [M, 8] (x1, y1, ..., x4, y4), but got shape ",
              shape_of(polygons));
  TORCH_CHECK(at::isFloatingType(points.scalar_type()), kOp, "expected points to have a floating point dtype, but got ",
              points.scalar_type());
  TORCH_CHECK(polygons.scalar_type() == points.scalar_type(), kOp, "expected polygons to have the dtype of points (",
              points.scalar_type(), "), but got ", polygons.scalar_type());
  TORCH_CHECK(polygons.device() == points.device(), kOp, "expected polygons on the device of points (", points.device(),
              "), but got ", polygons.device());
}

} // namespace detail
} // namespace mmops
