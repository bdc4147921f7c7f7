// Argument validation of the neighbour queries, on every backend (the meta
// kernels run it too, so fake tensors raise the same errors).

#include "neighbors/neighbors_ops.h"

#include "common/check_utils.h"
#include "common/index_policy.h"

#include "neighbors/neighbors_math.h"

#include <c10/core/ScalarType.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <vector>

namespace mmops {
namespace detail {
namespace {

constexpr int64_t kMaxPoints = std::numeric_limits<int32_t>::max(); // indices are int32

// A point set: `dims`-D, its coordinate axis (`coord_dim`) of size 3, floating.
void check_points(const char* op, const char* name, const at::Tensor& t, int64_t dims, int64_t coord_dim,
                  const char* layout) {
  TORCH_CHECK(t.dim() == dims && t.sym_size(coord_dim) == 3, op, "expected ", name, " to be a ", dims,
              "-D tensor of shape ", layout, ", but got shape ", shape_of(t));
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, "expected ", name, " to have a floating point dtype, but got ",
              t.scalar_type());
}

// `other` has the dtype and device of `ref` (named ref_name).
void check_same(const char* op, const char* name, const at::Tensor& other, const char* ref_name,
                const at::Tensor& ref) {
  TORCH_CHECK(other.scalar_type() == ref.scalar_type(), op, "expected ", name, " to have the dtype of ", ref_name, " (",
              ref.scalar_type(), "), but got ", other.scalar_type());
  TORCH_CHECK(other.device() == ref.device(), op, "expected ", name, " on the device of ", ref_name, " (", ref.device(),
              "), but got ", other.device());
}

void check_point_count(const char* op, const char* name, const c10::SymInt& n) {
  TORCH_SYM_CHECK(n.sym_le(kMaxPoints), op, "expected at most 2^31 - 1 points in ", name,
                  " (indices are int32), but got ", n);
}

void check_batches(const char* op, const char* name, const at::Tensor& t, const char* ref_name, const at::Tensor& ref) {
  TORCH_SYM_CHECK(t.sym_size(0).sym_eq(ref.sym_size(0)), op, "expected ", name, " to have the batch size of ", ref_name,
                  " (", ref.sym_size(0), "), but got shape ", shape_of(t));
}

void check_sample_num(const char* op, const c10::SymInt& sample_num) {
  TORCH_SYM_CHECK(sample_num.sym_ge(0).sym_and(sample_num.sym_le(kMaxSampleNum)), op, "sample_num must lie in [0, ",
                  kMaxSampleNum, "], but got ", sample_num);
}

// The output element count fits int64 (concrete sizes only).
void check_output_numel(const char* op, std::initializer_list<c10::SymInt> sizes) {
  std::vector<int64_t> concrete_sizes;
  for (const c10::SymInt& s : sizes) {
    const auto v = s.maybe_as_int();
    if (!v) {
      return;
    }
    concrete_sizes.push_back(*v);
  }
  checked_product(op, "the output's element count (sample_num too large)", concrete_sizes);
}

int64_t sample_num_of(const c10::SymInt& sample_num) {
  return sample_num.maybe_as_int().value_or(-1);
}

void check_count_tensor(const char* name, const at::Tensor& cnt, const at::Tensor& xyz) {
  TORCH_CHECK(cnt.dim() == 1, kStackBallQueryOp, "expected ", name, " to be a 1-D tensor [B], but got shape ",
              shape_of(cnt));
  TORCH_CHECK(cnt.scalar_type() == at::kInt || cnt.scalar_type() == at::kLong, kStackBallQueryOp, "expected ", name,
              " to be int32 or int64, but got ", cnt.scalar_type());
  TORCH_CHECK(cnt.device() == xyz.device(), kStackBallQueryOp, "expected ", name, " on the device of xyz (",
              xyz.device(), "), but got ", cnt.device());
}

} // namespace

BallQueryParams check_ball_query(double min_radius, double max_radius, const c10::SymInt& sample_num,
                                 const at::Tensor& xyz, const at::Tensor& center_xyz) {
  constexpr const char* kOp = kBallQueryOp;
  TORCH_CHECK(std::isfinite(min_radius) && min_radius >= 0, kOp, "min_radius must be a finite number >= 0, but got ",
              min_radius);
  TORCH_CHECK(std::isfinite(max_radius) && max_radius > min_radius, kOp,
              "max_radius must be a finite number greater than min_radius (", min_radius, "), but got ", max_radius);
  check_sample_num(kOp, sample_num);
  check_points(kOp, "xyz", xyz, 3, 2, "[B, N, 3]");
  check_points(kOp, "center_xyz", center_xyz, 3, 2, "[B, npoint, 3]");
  check_same(kOp, "center_xyz", center_xyz, "xyz", xyz);
  check_batches(kOp, "center_xyz", center_xyz, "xyz", xyz);
  check_point_count(kOp, "xyz", xyz.sym_size(1));
  check_output_numel(kOp, {center_xyz.sym_size(0), center_xyz.sym_size(1), sample_num});
  return BallQueryParams{min_radius, max_radius, sample_num_of(sample_num)};
}

BallQueryParams check_stack_ball_query(double max_radius, const c10::SymInt& sample_num, const at::Tensor& xyz,
                                       const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                                       const at::Tensor& center_xyz_batch_cnt) {
  constexpr const char* kOp = kStackBallQueryOp;
  TORCH_CHECK(std::isfinite(max_radius) && max_radius >= 0, kOp, "max_radius must be a finite number >= 0, but got ",
              max_radius);
  check_sample_num(kOp, sample_num);
  check_points(kOp, "xyz", xyz, 2, 1, "[N1 + N2 + ..., 3]");
  check_points(kOp, "center_xyz", center_xyz, 2, 1, "[M1 + M2 + ..., 3]");
  check_same(kOp, "center_xyz", center_xyz, "xyz", xyz);
  check_count_tensor("xyz_batch_cnt", xyz_batch_cnt, xyz);
  check_count_tensor("center_xyz_batch_cnt", center_xyz_batch_cnt, xyz);
  TORCH_SYM_CHECK(center_xyz_batch_cnt.sym_size(0).sym_eq(xyz_batch_cnt.sym_size(0)), kOp,
                  "expected center_xyz_batch_cnt to have the length of xyz_batch_cnt (", xyz_batch_cnt.sym_size(0),
                  "), but got ", center_xyz_batch_cnt.sym_size(0));
  check_point_count(kOp, "xyz", xyz.sym_size(0));
  check_output_numel(kOp, {center_xyz.sym_size(0), sample_num});
  return BallQueryParams{0.0, max_radius, sample_num_of(sample_num)};
}

void check_stack_counts(const at::Tensor& xyz, const at::Tensor& center_xyz, const at::Tensor& xyz_batch_cnt,
                        const at::Tensor& center_xyz_batch_cnt) {
  if (!should_validate_indices(xyz_batch_cnt)) {
    return;
  }
  const auto check = [](const char* name, const at::Tensor& cnt, int64_t total, const char* what) {
    const at::Tensor values = cnt.to(at::kCPU, at::kLong).contiguous();
    const int64_t* v = values.const_data_ptr<int64_t>();
    int64_t sum = 0;
    for (int64_t b = 0; b < values.numel(); ++b) {
      TORCH_CHECK(v[b] >= 0, kStackBallQueryOp, name, " must hold counts >= 0, but ", name, "[", b, "] = ", v[b]);
      sum = checked_add(kStackBallQueryOp, name, sum, v[b]);
    }
    TORCH_CHECK(sum == total, kStackBallQueryOp, "expected ", name, " to sum to ", what, " (", total, "), but got ",
                sum);
  };
  check("xyz_batch_cnt", xyz_batch_cnt, xyz.size(0), "the number of points in xyz");
  check("center_xyz_batch_cnt", center_xyz_batch_cnt, center_xyz.size(0), "the number of centres in center_xyz");
}

void check_knn(const c10::SymInt& k, const at::Tensor& xyz, const std::optional<at::Tensor>& center_xyz,
               bool transposed) {
  constexpr const char* kOp = kKnnOp;
  TORCH_SYM_CHECK(k.sym_ge(1).sym_and(k.sym_le(neighbors_math::kMaxK)), kOp, "k must lie in [1, ",
                  neighbors_math::kMaxK, "], but got ", k);
  const int64_t coord = transposed ? 1 : 2;
  check_points(kOp, "xyz", xyz, 3, coord, transposed ? "[B, 3, N] (transposed)" : "[B, N, 3]");
  check_point_count(kOp, "xyz", xyz.sym_size(3 - coord));
  if (center_xyz.has_value()) {
    const at::Tensor& c = *center_xyz;
    check_points(kOp, "center_xyz", c, 3, coord, transposed ? "[B, 3, npoint] (transposed)" : "[B, npoint, 3]");
    check_same(kOp, "center_xyz", c, "xyz", xyz);
    check_batches(kOp, "center_xyz", c, "xyz", xyz);
  }
}

void check_three_nn(const at::Tensor& target, const at::Tensor& source) {
  constexpr const char* kOp = kThreeNNOp;
  check_points(kOp, "target", target, 3, 2, "[B, N, 3]");
  check_points(kOp, "source", source, 3, 2, "[B, M, 3]");
  check_same(kOp, "source", source, "target", target);
  check_batches(kOp, "source", source, "target", target);
  check_point_count(kOp, "source", source.sym_size(1));
}

} // namespace detail
} // namespace mmops
