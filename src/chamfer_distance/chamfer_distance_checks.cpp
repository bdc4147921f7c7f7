// Argument validation of chamfer_distance, on every backend (the meta kernels
// run it too, so fake tensors raise the same errors).

#include "chamfer_distance/chamfer_distance_ops.h"

#include "common/check_utils.h"
#include "common/index_policy.h"

#include <c10/core/SymInt.h>

#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kChamferDistanceOp;

void check_points(const at::Tensor& xyz, const char* name) {
  TORCH_CHECK(xyz.dim() == 3, kOp, "expected ", name, " to be a 3-D tensor [batch, points, 2], but got a ", xyz.dim(),
              "-D tensor of shape ", shape_of(xyz));
  TORCH_SYM_CHECK(xyz.sym_size(2).sym_eq(2), kOp, "expected ", name, " to hold 2-D points [batch, points, 2], ",
                  "but got shape ", shape_of(xyz));
  TORCH_CHECK(at::isFloatingType(xyz.scalar_type()), kOp, "expected ", name,
              " to have a floating point dtype, but got ", xyz.scalar_type());
  TORCH_SYM_CHECK(xyz.sym_size(1).sym_le(std::numeric_limits<int32_t>::max()), kOp, "expected ", name,
                  " to hold fewer than 2^31 points (the indices are int32), but got ", xyz.sym_size(1));
}

// idx [batch, count] int32 and grad [batch, count] of xyz1's dtype, on its device.
void check_per_point(const at::Tensor& t, const char* name, const at::Tensor& xyz1, const c10::SymInt& batch,
                     const c10::SymInt& count, bool index) {
  TORCH_CHECK(t.dim() == 2, kOp, "expected ", name, " to be a 2-D tensor, but got shape ", shape_of(t));
  TORCH_SYM_CHECK(t.sym_size(0).sym_eq(batch).sym_and(t.sym_size(1).sym_eq(count)), kOp, "expected ", name,
                  " of shape [", batch, ", ", count, "], but got ", shape_of(t));
  TORCH_CHECK(t.device() == xyz1.device(), kOp, "expected ", name, " on the device of xyz1 (", xyz1.device(),
              "), but got ", t.device());
  if (index) {
    TORCH_CHECK(t.scalar_type() == at::kInt, kOp, "expected ", name, " to have dtype int32, but got ", t.scalar_type());
  } else {
    TORCH_CHECK(t.scalar_type() == xyz1.scalar_type(), kOp, "expected ", name, " to have the dtype of xyz1 (",
                xyz1.scalar_type(), "), but got ", t.scalar_type());
  }
}

} // namespace

ChamferDistanceParams check_chamfer_distance_forward(const at::Tensor& xyz1, const at::Tensor& xyz2) {
  check_points(xyz1, "xyz1");
  check_points(xyz2, "xyz2");
  TORCH_CHECK(xyz2.scalar_type() == xyz1.scalar_type(), kOp, "expected xyz2 to have the dtype of xyz1 (",
              xyz1.scalar_type(), "), but got ", xyz2.scalar_type());
  TORCH_CHECK(xyz2.device() == xyz1.device(), kOp, "expected xyz2 on the device of xyz1 (", xyz1.device(),
              "), but got ", xyz2.device());
  TORCH_SYM_CHECK(xyz2.sym_size(0).sym_eq(xyz1.sym_size(0)), kOp, "expected xyz2 to have the batch size of xyz1 (",
                  xyz1.sym_size(0), "), but got ", shape_of(xyz2));
  // a point needs a nearest point in the other set
  const c10::SymInt& n = xyz1.sym_size(1);
  const c10::SymInt& m = xyz2.sym_size(1);
  TORCH_SYM_CHECK(n.sym_eq(0).sym_and(m.sym_eq(0)).sym_or(n.sym_ne(0).sym_and(m.sym_ne(0))), kOp,
                  "expected xyz1 and xyz2 to be both empty or both non-empty in points (a point needs a nearest ",
                  "point), but got ", shape_of(xyz1), " and ", shape_of(xyz2));
  return {int_or_unknown(xyz1.sym_size(0)), int_or_unknown(n), int_or_unknown(m)};
}

ChamferDistanceParams check_chamfer_distance_backward(const at::Tensor& xyz1, const at::Tensor& xyz2,
                                                      const at::Tensor& idx1, const at::Tensor& idx2,
                                                      const at::Tensor& grad_dist1, const at::Tensor& grad_dist2) {
  const ChamferDistanceParams p = check_chamfer_distance_forward(xyz1, xyz2);
  const c10::SymInt& batch = xyz1.sym_size(0);
  check_per_point(idx1, "idx1", xyz1, batch, xyz1.sym_size(1), true);
  check_per_point(idx2, "idx2", xyz1, batch, xyz2.sym_size(1), true);
  check_per_point(grad_dist1, "grad_dist1", xyz1, batch, xyz1.sym_size(1), false);
  check_per_point(grad_dist2, "grad_dist2", xyz1, batch, xyz2.sym_size(1), false);
  return p;
}

void check_chamfer_distance_indices(const at::Tensor& idx1, const at::Tensor& idx2, const ChamferDistanceParams& p) {
  for (const auto& [idx, name, count] : {std::tuple{&idx1, "idx1", p.m}, std::tuple{&idx2, "idx2", p.n}}) {
    if (idx->numel() == 0) {
      continue;
    }
    const auto [min, max] = index_value_range(*idx);
    TORCH_CHECK(min >= 0 && max < count, kOp, "expected every value of ", name, " in [0, ", count,
                ") (the points of the other set), but got values in [", min, ", ", max, "]");
  }
}

} // namespace detail
} // namespace mmops
