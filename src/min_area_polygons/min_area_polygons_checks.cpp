// Argument validation of min_area_polygons (the meta kernel runs it too).

#include "common/check_utils.h"
#include "min_area_polygons/min_area_polygons_ops.h"

#include <c10/core/ScalarType.h>

namespace mmops {
namespace detail {

void check_min_area_polygons(const at::Tensor& pointsets) {
  TORCH_CHECK(pointsets.dim() == 2 && pointsets.sym_size(1) == 18, kMinAreaPolygonsOp,
              "expected pointsets to be a 2-D tensor of shape [N, 18] (9 points x, y), but got shape ",
              shape_of(pointsets));
  TORCH_CHECK(at::isFloatingType(pointsets.scalar_type()), kMinAreaPolygonsOp,
              "expected pointsets to have a floating point dtype, but got ", pointsets.scalar_type());
}

} // namespace detail
} // namespace mmops
