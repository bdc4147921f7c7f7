// Argument validation of hard_voxelize, dynamic_voxelize and dynamic_scatter,
// on every backend: the device entries, the meta kernels and the
// validation-only schemas of the Python fake kernels run it (sizes may be
// symbolic).

#include "common/check_utils.h"
#include "common/index_policy.h"
#include "voxelization/voxelization_ops.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace mmops {
namespace detail {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr const char* kAxes[3] = {"x", "y", "z"};

constexpr std::pair<const char*, ScatterReduce> kReductions[] = {
    {"sum", ScatterReduce::Sum}, {"mean", ScatterReduce::Mean}, {"max", ScatterReduce::Max}};

// voxel_size [3] and coors_range [6] (x_min, y_min, z_min, x_max, y_max, z_max),
// rounded to float32 as mmcv's parameters are; the cells per axis in float32
// arithmetic, round((max - min) / size), as mmcv computes them.
VoxelGrid check_grid(const char* op, c10::ArrayRef<double> voxel_size, c10::ArrayRef<double> coors_range) {
  TORCH_CHECK(voxel_size.size() == 3, op, "expected voxel_size to have 3 values (x, y, z), but got ",
              voxel_size.size());
  TORCH_CHECK(coors_range.size() == 6, op,
              "expected coors_range to have 6 values (x_min, y_min, z_min, x_max, y_max, z_max), but got ",
              coors_range.size());
  VoxelGrid g{};
  for (int a = 0; a < 3; ++a) {
    const float size = static_cast<float>(voxel_size[a]);
    const float lo = static_cast<float>(coors_range[a]);
    const float hi = static_cast<float>(coors_range[a + 3]);
    TORCH_CHECK(std::isfinite(size) && size > 0, op, "expected voxel_size[", a,
                "] to be a positive finite float32, but got ", voxel_size[a]);
    TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), op,
                "expected coors_range to hold finite float32 values, but got ", coors_range[a], " and ",
                coors_range[a + 3], " along ", kAxes[a]);
    const float cells = std::round((hi - lo) / size);
    TORCH_CHECK(cells >= 1 && cells <= static_cast<float>(1 << 30), op,
                "expected coors_range and voxel_size to give 1 to ", 1 << 30, " voxels along ", kAxes[a],
                " (round((max - min) / size)), but got ", cells);
    g.size[a] = size;
    g.min[a] = lo;
    g.cells[a] = static_cast<int32_t>(cells);
  }
  checked_product(op, "the voxel grid of coors_range and voxel_size",
                  {int64_t(g.cells[0]), int64_t(g.cells[1]), int64_t(g.cells[2])});
  return g;
}

// points [N, ndim >= 3], floating; N < 2^31 when `indexed` (int32 point indices).
void check_points(const char* op, const at::Tensor& points, bool indexed) {
  TORCH_CHECK(points.dim() == 2 && points.sym_size(1) >= 3, op,
              "expected points to be a 2-D tensor of shape [N, ndim] with ndim >= 3 (x, y, z, ...), but got shape ",
              shape_of(points));
  TORCH_CHECK(at::isFloatingType(points.scalar_type()), op, "expected points to have a floating point dtype, but got ",
              points.scalar_type());
  if (indexed) {
    TORCH_SYM_CHECK(points.sym_size(0).sym_le(kInt32Max), op, "expected at most 2^31 - 1 points, but got ",
                    points.sym_size(0));
  }
}

void check_range(const char* op, const char* name, int64_t value, int64_t lo, int64_t hi) {
  TORCH_CHECK(value >= lo && value <= hi, op, "expected ", name, " in [", lo, ", ", hi, "], but got ", value);
}

} // namespace

const char* reduce_name(ScatterReduce reduce) {
  return choice_name(reduce, kReductions);
}

VoxelGrid check_dynamic_voxelize(const at::Tensor& points, c10::ArrayRef<double> voxel_size,
                                 c10::ArrayRef<double> coors_range) {
  check_points(kDynamicVoxelizeOp, points, /*indexed=*/false);
  return check_grid(kDynamicVoxelizeOp, voxel_size, coors_range);
}

HardVoxelizeParams check_hard_voxelize(const at::Tensor& points, c10::ArrayRef<double> voxel_size,
                                       c10::ArrayRef<double> coors_range, const c10::SymInt& max_points,
                                       int64_t max_voxels) {
  const char* op = kHardVoxelizeOp;
  check_points(op, points, /*indexed=*/true);
  HardVoxelizeParams p{};
  p.grid = check_grid(op, voxel_size, coors_range);
  p.max_points = max_points.guard_int(__FILE__, __LINE__);
  p.max_voxels = max_voxels;
  check_range(op, "max_points", p.max_points, 1, kInt32Max);
  check_range(op, "max_voxels", p.max_voxels, 1, kInt32Max);
  TORCH_CHECK(p.max_points * p.max_voxels <= kInt32Max, op,
              "expected max_voxels * max_points (the rows of the voxels output) to be at most 2^31 - 1, but got ",
              p.max_voxels, " * ", p.max_points);
  return p;
}

ScatterReduce check_dynamic_scatter(const at::Tensor& feats, const at::Tensor& coors, c10::string_view reduce) {
  const char* op = kDynamicScatterOp;
  TORCH_CHECK(feats.dim() == 2, op, "expected feats to be a 2-D tensor of shape [N, C], but got shape ",
              shape_of(feats));
  TORCH_CHECK(at::isFloatingType(feats.scalar_type()), op, "expected feats to have a floating point dtype, but got ",
              feats.scalar_type());
  TORCH_SYM_CHECK(feats.sym_size(0).sym_le(kInt32Max), op, "expected at most 2^31 - 1 points in feats, but got ",
                  feats.sym_size(0));
  const c10::SymBool fits = coors.dim() == 2 ? coors.sym_size(0).sym_eq(feats.sym_size(0)) : c10::SymBool(false);
  TORCH_SYM_CHECK(fits, op,
                  "expected coors to be a 2-D tensor of shape [N, D] with N = feats.size(0) = ", feats.sym_size(0),
                  ", but got shape ", shape_of(coors));
  TORCH_CHECK(coors.sym_size(1) >= 1, op, "expected coors to have at least one column, but got shape ",
              shape_of(coors));
  TORCH_CHECK(coors.scalar_type() == at::kInt, op, "expected coors to have dtype int32 (Int), but got ",
              coors.scalar_type());
  TORCH_CHECK(coors.device() == feats.device(), op, "expected coors on the device of feats (", feats.device(),
              "), but got ", coors.device());
  return parse_choice(op, "reduce", reduce, kReductions);
}

ScatterReduce check_dynamic_scatter_backward(const at::Tensor& grad, const at::Tensor& point2voxel,
                                             const at::Tensor& count, const at::Tensor& argmax,
                                             c10::string_view reduce_text) {
  const char* op = kDynamicScatterOp;
  const ScatterReduce reduce = parse_choice(op, "reduce", reduce_text, kReductions);
  TORCH_CHECK(grad.dim() == 2 && at::isFloatingType(grad.scalar_type()), op,
              "expected grad_voxel_feats to be a floating 2-D tensor [M, C], but got shape ", shape_of(grad), " and ",
              grad.scalar_type());
  TORCH_CHECK(point2voxel.dim() == 1 && point2voxel.scalar_type() == at::kInt, op,
              "expected point2voxel to be a 1-D int32 tensor [N], but got shape ", shape_of(point2voxel), " and ",
              point2voxel.scalar_type());
  TORCH_SYM_CHECK(point2voxel.sym_size(0).sym_le(kInt32Max), op,
                  "expected at most 2^31 - 1 points in point2voxel, but got ", point2voxel.sym_size(0));
  const c10::SymBool count_fits = count.dim() == 1 ? count.sym_size(0).sym_eq(grad.sym_size(0)) : c10::SymBool(false);
  TORCH_SYM_CHECK(count_fits, op,
                  "expected voxel_points_count to be a 1-D tensor [M] with M = grad_voxel_feats.size(0) = ",
                  grad.sym_size(0), ", but got shape ", shape_of(count));
  TORCH_CHECK(count.scalar_type() == at::kInt, op, "expected voxel_points_count to have dtype int32, but got ",
              count.scalar_type());
  const c10::SymInt rows = reduce == ScatterReduce::Max ? grad.sym_size(0) : c10::SymInt(0);
  const c10::SymBool argmax_fits =
      argmax.dim() == 2 ? argmax.sym_size(0).sym_eq(rows).sym_and(argmax.sym_size(1).sym_eq(grad.sym_size(1)))
                        : c10::SymBool(false);
  TORCH_SYM_CHECK(argmax_fits, op, "expected argmax to be a 2-D tensor [", rows, ", ", grad.sym_size(1), "] (reduce \"",
                  reduce_name(reduce), "\"), but got shape ", shape_of(argmax));
  TORCH_CHECK(argmax.scalar_type() == at::kInt, op, "expected argmax to have dtype int32, but got ",
              argmax.scalar_type());
  for (const at::Tensor* t : {&point2voxel, &count, &argmax}) {
    TORCH_CHECK(t->device() == grad.device(), op, "expected every tensor on the device of grad_voxel_feats (",
                grad.device(), "), but got ", t->device());
  }
  return reduce;
}

void check_scatter_indices(const at::Tensor& point2voxel, const at::Tensor& count, const at::Tensor& argmax) {
  const char* op = kDynamicScatterOp;
  const int64_t n = point2voxel.size(0);
  const int64_t m = count.size(0);
  if (n > 0) {
    const auto [lo, hi] = index_value_range(point2voxel);
    TORCH_CHECK(lo >= -1 && hi < m, op, "expected point2voxel values in [-1, M = ", m, "), but got values in [", lo,
                ", ", hi, "]");
  }
  if (m > 0) {
    const int64_t lo = index_value_range(count).first;
    TORCH_CHECK(lo >= 1, op, "expected voxel_points_count values >= 1, but got ", lo);
  }
  if (argmax.numel() > 0) {
    const auto [lo, hi] = index_value_range(argmax);
    TORCH_CHECK(lo >= 0 && hi < n, op, "expected argmax values in [0, N = ", n, "), but got values in [", lo, ", ", hi,
                "]");
  }
}

} // namespace detail
} // namespace mmops
