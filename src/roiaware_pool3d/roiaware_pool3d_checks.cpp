// Argument validation of roiaware_pool3d (the meta kernels run it too).

#include "roiaware_pool3d/roiaware_pool3d_ops.h"

#include "common/check_utils.h"
#include "common/index_policy.h"

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kRoIAwarePool3dOp;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int64_t known(const c10::SymInt& s) {
  return s.maybe_as_int().value_or(-1);
}

} // namespace

RoIAwarePool3dParams check_roiaware_pool3d_forward(const at::Tensor& rois, const at::Tensor& pts,
                                                   const at::Tensor& pts_feature, c10::SymIntArrayRef out_size,
                                                   int64_t max_pts_per_voxel, c10::string_view mode) {
  TORCH_CHECK(rois.dim() == 2 && rois.sym_size(1) == 7, kOp,
              "expected rois to be a 2-D tensor of shape [N, 7] (x, y, z, dx, dy, dz, rz), but got shape ",
              shape_of(rois));
  TORCH_CHECK(pts.dim() == 2 && pts.sym_size(1) == 3, kOp,
              "expected pts to be a 2-D tensor of shape [P, 3] (x, y, z), but got shape ", shape_of(pts));
  TORCH_CHECK(pts_feature.dim() == 2, kOp, "expected pts_feature to be a 2-D tensor [P, C], but got shape ",
              shape_of(pts_feature));
  TORCH_SYM_CHECK(pts_feature.sym_size(0).sym_eq(pts.sym_size(0)), kOp,
                  "expected pts_feature to have one row per point (", pts.sym_size(0), "), but got ",
                  pts_feature.sym_size(0));
  TORCH_CHECK(at::isFloatingType(pts_feature.scalar_type()), kOp,
              "expected pts_feature to have a floating point dtype, but got ", pts_feature.scalar_type());
  TORCH_CHECK(rois.scalar_type() == pts_feature.scalar_type() && pts.scalar_type() == pts_feature.scalar_type(), kOp,
              "expected rois and pts to have the dtype of pts_feature (", pts_feature.scalar_type(), "), but got ",
              rois.scalar_type(), " and ", pts.scalar_type());
  TORCH_CHECK(rois.device() == pts_feature.device() && pts.device() == pts_feature.device(), kOp,
              "expected rois and pts on the device of pts_feature (", pts_feature.device(), "), but got ",
              rois.device(), " and ", pts.device());
  TORCH_CHECK(out_size.size() == 3, kOp, "expected out_size to hold 3 values (out_x, out_y, out_z), but got ",
              out_size.size());
  for (const c10::SymInt& s : out_size) {
    TORCH_SYM_CHECK(s.sym_ge(1).sym_and(s.sym_le(kInt32Max)), kOp, "out_size values must be in [1, 2^31 - 1], but got ",
                    out_size);
  }
  TORCH_CHECK(max_pts_per_voxel >= 1 && max_pts_per_voxel <= kInt32Max, kOp,
              "max_pts_per_voxel must be in [1, 2^31 - 1], but got ", max_pts_per_voxel);
  TORCH_SYM_CHECK(pts.sym_size(0).sym_le(kInt32Max), kOp,
                  "expected fewer than 2^31 points (point indices are int32), but got ", pts.sym_size(0));
  RoIAwarePool3dParams p{};
  p.mode = parse_choice(kOp, "mode", mode, kRoIAwarePoolModes);
  p.max_kept = max_pts_per_voxel - 1;
  p.out_x = known(out_size[0]);
  p.out_y = known(out_size[1]);
  p.out_z = known(out_size[2]);
  const int64_t n = known(rois.sym_size(0)), num_points = known(pts.sym_size(0)), c = known(pts_feature.sym_size(1));
  if (p.out_x > 0 && p.out_y > 0 && p.out_z > 0) {
    const int64_t voxels = checked_product(kOp, "out_x * out_y * out_z", {p.out_x, p.out_y, p.out_z});
    TORCH_CHECK(voxels <= kInt32Max, kOp, "expected out_x * out_y * out_z < 2^31 (voxel indices are int32), but got ",
                voxels);
    if (n >= 0 && c >= 0) {
      checked_product(kOp, "the output [N, out_x, out_y, out_z, C]: its element count", {n, voxels, c});
    }
  }
  if (n >= 0 && num_points >= 0) {
    checked_product(kOp, "the (roi, point) pairs N * P", {n, num_points});
  }
  return p;
}

RoIAwarePool3dParams check_roiaware_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& argmax,
                                                    const at::Tensor& point_voxels, const at::Tensor& voxel_counts,
                                                    c10::string_view mode) {
  TORCH_CHECK(grad_output.dim() == 5, kOp, "expected grad_output to be a 5-D tensor [N, X, Y, Z, C], but got shape ",
              shape_of(grad_output));
  TORCH_CHECK(at::isFloatingType(grad_output.scalar_type()), kOp,
              "expected grad_output to have a floating point dtype, but got ", grad_output.scalar_type());
  RoIAwarePool3dParams p{};
  p.mode = parse_choice(kOp, "mode", mode, kRoIAwarePoolModes);
  const c10::SymInt n = grad_output.sym_size(0);
  const c10::SymInt voxels = grad_output.sym_size(1) * grad_output.sym_size(2) * grad_output.sym_size(3);
  for (const at::Tensor* t : {&argmax, &point_voxels, &voxel_counts}) {
    TORCH_CHECK(t->scalar_type() == at::kInt && t->device() == grad_output.device(), kOp,
                "expected argmax, point_voxels and voxel_counts to be int32 tensors on ", grad_output.device(),
                ", but got ", t->scalar_type(), " on ", t->device());
  }
  TORCH_CHECK(point_voxels.dim() == 2, kOp, "expected point_voxels to be a 2-D tensor [N, P], but got shape ",
              shape_of(point_voxels));
  TORCH_SYM_CHECK(point_voxels.sym_size(0).sym_eq(n), kOp, "expected point_voxels to have ", n,
                  " rows (one per roi), but got shape ", shape_of(point_voxels));
  TORCH_CHECK(voxel_counts.dim() == 2, kOp, "expected voxel_counts to be a 2-D tensor [N, X * Y * Z], but got shape ",
              shape_of(voxel_counts));
  TORCH_SYM_CHECK(voxel_counts.sym_size(0).sym_eq(n).sym_and(voxel_counts.sym_size(1).sym_eq(voxels)), kOp,
                  "expected voxel_counts of shape [", n, ", ", voxels, "], but got shape ", shape_of(voxel_counts));
  if (p.mode == RoIAwarePoolMode::kMax) {
    TORCH_CHECK(argmax.sym_sizes() == grad_output.sym_sizes(), kOp, "expected argmax of shape ", shape_of(grad_output),
                ", but got ", shape_of(argmax));
  }
  p.out_x = known(grad_output.sym_size(1));
  p.out_y = known(grad_output.sym_size(2));
  p.out_z = known(grad_output.sym_size(3));
  return p;
}

void check_point_voxels(const at::Tensor& point_voxels, int64_t voxels) {
  if (point_voxels.numel() == 0) {
    return;
  }
  const auto [low, high] = index_value_range(point_voxels);
  TORCH_CHECK(low >= -1 && high < voxels, kOp, "expected point_voxels in [-1, ", voxels, "), but got values in [", low,
              ", ", high, "]");
}

} // namespace detail
} // namespace mmops
