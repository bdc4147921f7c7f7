// Argument validation of points_in_boxes_part / _all (the meta kernels run it too).

#include "points_in_boxes/points_in_boxes_ops.h"

#include "common/check_utils.h"

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {

void check_points_in_boxes(const char* op, const at::Tensor& points, const at::Tensor& boxes) {
  TORCH_CHECK(points.dim() == 3 && points.sym_size(2) == 3, op,
              "expected points to be a 3-D tensor of shape [B, N, 3] (x, y, z), but got shape ", shape_of(points));
  TORCH_CHECK(boxes.dim() == 3 && boxes.sym_size(2) == 7, op,
              "expected boxes to be a 3-D tensor of shape [B, M, 7] (x, y, z, dx, dy, dz, rz), but got shape ",
              shape_of(boxes));
  TORCH_SYM_CHECK(boxes.sym_size(0).sym_eq(points.sym_size(0)), op, "expected boxes to have the batch size of points (",
                  points.sym_size(0), "), but got ", boxes.sym_size(0));
  TORCH_CHECK(at::isFloatingType(points.scalar_type()), op, "expected points to have a floating point dtype, but got ",
              points.scalar_type());
  TORCH_CHECK(boxes.scalar_type() == points.scalar_type(), op, "expected boxes to have the dtype of points (",
              points.scalar_type(), "), but got ", boxes.scalar_type());
  TORCH_CHECK(boxes.device() == points.device(), op, "expected boxes on the device of points (", points.device(),
              "), but got ", boxes.device());
  TORCH_SYM_CHECK(boxes.sym_size(1).sym_le(std::numeric_limits<int32_t>::max()), op,
                  "expected fewer than 2^31 boxes per batch (box indices are int32), but got ", boxes.sym_size(1));
  const auto b = points.sym_size(0).maybe_as_int(), n = points.sym_size(1).maybe_as_int();
  const auto m = boxes.sym_size(1).maybe_as_int();
  if (b && n && m) {
    checked_product(op, "the number of (point, box) pairs B * N * M", {*b, *n, *m});
  }
}

} // namespace detail
} // namespace mmops
