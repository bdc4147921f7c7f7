// Argument validation of rotated_feature_align, on every backend (the meta
// kernels run it too, so fake tensors raise the same errors).

#include "rotated_feature_align/rotated_feature_align_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kRotatedFeatureAlignOp;

void check_map(const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.dim() == 4, kOp, "expected ", name, " to be a 4-D tensor [N, C, H, W], but got a ", t.dim(),
              "-D tensor of shape ", shape_of(t));
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), kOp, "expected ", name, " to have a floating point dtype, but got ",
              t.scalar_type());
  // the bilinear taps index rows and columns in int
  TORCH_SYM_CHECK(t.sym_size(2).sym_lt(std::numeric_limits<int32_t>::max()), kOp, "expected ", name,
                  " to have H < 2^31 - 1, but got H = ", t.sym_size(2));
  TORCH_SYM_CHECK(t.sym_size(3).sym_lt(std::numeric_limits<int32_t>::max()), kOp, "expected ", name,
                  " to have W < 2^31 - 1, but got W = ", t.sym_size(3));
}

RotatedFeatureAlignParams check_rest(const at::Tensor& map, const at::Tensor& boxes, double spatial_scale,
                                     int64_t points) {
  TORCH_CHECK(boxes.dim() == 4 && boxes.sym_size(3) == 5, kOp,
              "expected best_rbboxes to be a 4-D tensor [N, H, W, 5], but got shape ", shape_of(boxes));
  TORCH_SYM_CHECK(boxes.sym_size(0)
                      .sym_eq(map.sym_size(0))
                      .sym_and(boxes.sym_size(1).sym_eq(map.sym_size(2)))
                      .sym_and(boxes.sym_size(2).sym_eq(map.sym_size(3))),
                  kOp, "expected best_rbboxes of shape [", map.sym_size(0), ", ", map.sym_size(2), ", ",
                  map.sym_size(3), ", 5] (N, H, W of features), but got ", shape_of(boxes));
  TORCH_CHECK(boxes.scalar_type() == map.scalar_type(), kOp, "expected best_rbboxes to have the dtype of features (",
              map.scalar_type(), "), but got ", boxes.scalar_type());
  TORCH_CHECK(boxes.device() == map.device(), kOp, "expected best_rbboxes on the device of features (", map.device(),
              "), but got ", boxes.device());
  TORCH_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, kOp,
              "spatial_scale must be a positive finite number, but got ", spatial_scale);
  TORCH_CHECK(points == 1 || points == 5, kOp, "points must be 1 or 5, but got ", points);
  return RotatedFeatureAlignParams{spatial_scale, points};
}

} // namespace

RotatedFeatureAlignParams check_rotated_feature_align_forward(const at::Tensor& features,
                                                              const at::Tensor& best_rbboxes, double spatial_scale,
                                                              int64_t points) {
  check_map("features", features);
  return check_rest(features, best_rbboxes, spatial_scale, points);
}

RotatedFeatureAlignParams check_rotated_feature_align_backward(const at::Tensor& grad_output,
                                                               const at::Tensor& best_rbboxes, double spatial_scale,
                                                               int64_t points) {
  check_map("grad_output", grad_output);
  return check_rest(grad_output, best_rbboxes, spatial_scale, points);
}

} // namespace detail
} // namespace mmops
