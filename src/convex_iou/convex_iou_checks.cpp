// Argument validation of convex_iou and convex_giou (the meta kernels run it too).

#include "common/check_utils.h"
#include "convex_iou/convex_iou_ops.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

namespace mmops {
namespace detail {
namespace {

void check_pair(const char* op, const at::Tensor& pointsets, const at::Tensor& polygons, const char* rows) {
  TORCH_CHECK(pointsets.dim() == 2 && pointsets.sym_size(1) == 18, op,
              "expected pointsets to be a 2-D tensor of shape [N, 18] (9 points x, y), but got shape ",
              shape_of(pointsets));
  TORCH_CHECK(polygons.dim() == 2 && polygons.sym_size(1) == 8, op, "expected polygons to be a 2-D tensor of shape [",
              rows, ", 8] (x1, y1, ..., x4, y4), but got shape ", shape_of(polygons));
  TORCH_CHECK(at::isFloatingType(pointsets.scalar_type()), op,
              "expected pointsets to have a floating point dtype, but got ", pointsets.scalar_type());
  TORCH_CHECK(polygons.scalar_type() == pointsets.scalar_type(), op,
              "expected polygons to have the dtype of pointsets (", pointsets.scalar_type(), "), but got ",
              polygons.scalar_type());
  TORCH_CHECK(polygons.device() == pointsets.device(), op, "expected polygons on the device of pointsets (",
              pointsets.device(), "), but got ", polygons.device());
}

} // namespace

void check_convex_iou(const at::Tensor& pointsets, const at::Tensor& polygons) {
  check_pair("mmops::convex_iou: ", pointsets, polygons, "K");
}

void check_convex_giou(const at::Tensor& pointsets, const at::Tensor& polygons) {
  constexpr const char* kOp = "mmops::convex_giou: ";
  check_pair(kOp, pointsets, polygons, "N");
  TORCH_SYM_CHECK(polygons.sym_size(0).sym_eq(pointsets.sym_size(0)), kOp,
                  "expected as many polygons as pointsets (row i with row i), but got ", polygons.sym_size(0), " and ",
                  pointsets.sym_size(0));
}

} // namespace detail
} // namespace mmops
