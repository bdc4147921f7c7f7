// Argument validation of gather_points, group_points and stack_group_points
// (the meta kernels run it too, so fake tensors raise the same errors).

#include "group_points/group_points_ops.h"

#include "common/check_utils.h"
#include "common/index_policy.h"

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace mmops {
namespace detail {
namespace {

// int32 indices, and the n + 1 bounds of the CUDA backward, stay below 2^31.
constexpr int64_t kMaxPoints = std::numeric_limits<int32_t>::max() - 1;

void check_floating(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, "expected ", name, " to have a floating point dtype, but got ",
              t.scalar_type());
}

void check_int32(const char* op, const char* name, const at::Tensor& t, const at::Tensor& data) {
  TORCH_CHECK(t.scalar_type() == at::kInt, op, "expected ", name, " to be int32 (as mmcv), but got ", t.scalar_type());
  TORCH_CHECK(t.device() == data.device(), op, "expected ", name, " on the device of the features (", data.device(),
              "), but got ", t.device());
}

void check_point_count(const char* op, const char* name, const c10::SymInt& n) {
  TORCH_SYM_CHECK(n.sym_ge(0), op, "expected ", name, " >= 0, but got ", n);
  TORCH_SYM_CHECK(n.sym_le(kMaxPoints), op, "expected ", name, " < 2^31 - 1 (the indices are int32), but got ", n);
}

// features [B, C, N] (or grad_output [B, C, ...]) with indices [B, ...] whose trailing dims match `dims`.
void check_batched(const char* op, const char* name, const at::Tensor& data, const at::Tensor& indices,
                   int64_t data_dim, int64_t index_dim, const char* data_shape, const char* index_shape) {
  TORCH_CHECK(data.dim() == data_dim, op, "expected ", name, " to be a ", data_dim, "-D tensor ", data_shape,
              ", but got shape ", shape_of(data));
  check_floating(op, name, data);
  TORCH_CHECK(indices.dim() == index_dim, op, "expected indices to be a ", index_dim, "-D tensor ", index_shape,
              ", but got shape ", shape_of(indices));
  check_int32(op, "indices", indices, data);
  TORCH_SYM_CHECK(indices.sym_size(0).sym_eq(data.sym_size(0)), op, "expected indices to have the batch size of ", name,
                  " (", data.sym_size(0), "), but got shape ", shape_of(indices));
}

void check_counts(const char* name, const at::Tensor& counts, const at::Tensor& data) {
  TORCH_CHECK(counts.dim() == 1, kStackGroupPointsOp, "expected ", name, " to be a 1-D tensor [B], but got shape ",
              shape_of(counts));
  check_int32(kStackGroupPointsOp, name, counts, data);
}

void check_stacked(const at::Tensor& data, const char* name, const at::Tensor& features_batch_cnt,
                   const at::Tensor& indices, const at::Tensor& indices_batch_cnt) {
  check_floating(kStackGroupPointsOp, name, data);
  TORCH_CHECK(indices.dim() == 2, kStackGroupPointsOp,
              "expected indices to be a 2-D tensor [M1 + M2 + ..., nsample], but got shape ", shape_of(indices));
  check_int32(kStackGroupPointsOp, "indices", indices, data);
  check_counts("features_batch_cnt", features_batch_cnt, data);
  check_counts("indices_batch_cnt", indices_batch_cnt, data);
  TORCH_SYM_CHECK(features_batch_cnt.sym_size(0).sym_eq(indices_batch_cnt.sym_size(0)), kStackGroupPointsOp,
                  "expected features_batch_cnt and indices_batch_cnt of one batch size, but got ",
                  shape_of(features_batch_cnt), " and ", shape_of(indices_batch_cnt));
}

} // namespace

void check_gather_points_forward(const at::Tensor& features, const at::Tensor& indices) {
  check_batched(kGatherPointsOp, "features", features, indices, 3, 2, "[B, C, N]", "[B, M]");
  check_point_count(kGatherPointsOp, "N", features.sym_size(2));
}

void check_gather_points_backward(const at::Tensor& grad_output, const at::Tensor& indices, const c10::SymInt& n) {
  check_batched(kGatherPointsOp, "grad_output", grad_output, indices, 3, 2, "[B, C, M]", "[B, M]");
  TORCH_SYM_CHECK(grad_output.sym_size(2).sym_eq(indices.sym_size(1)), kGatherPointsOp,
                  "expected grad_output of shape [B, C, M] with M = ", indices.sym_size(1), ", but got shape ",
                  shape_of(grad_output));
  check_point_count(kGatherPointsOp, "n", n);
}

void check_group_points_forward(const at::Tensor& features, const at::Tensor& indices) {
  check_batched(kGroupPointsOp, "features", features, indices, 3, 3, "[B, C, N]", "[B, npoint, nsample]");
  check_point_count(kGroupPointsOp, "N", features.sym_size(2));
}

void check_group_points_backward(const at::Tensor& grad_output, const at::Tensor& indices, const c10::SymInt& n) {
  check_batched(kGroupPointsOp, "grad_output", grad_output, indices, 4, 3, "[B, C, npoint, nsample]",
                "[B, npoint, nsample]");
  TORCH_SYM_CHECK(
      grad_output.sym_size(2).sym_eq(indices.sym_size(1)).sym_and(grad_output.sym_size(3).sym_eq(indices.sym_size(2))),
      kGroupPointsOp, "expected grad_output of shape [B, C, ", indices.sym_size(1), ", ", indices.sym_size(2),
      "], but got shape ", shape_of(grad_output));
  check_point_count(kGroupPointsOp, "n", n);
}

void check_stack_group_points_forward(const at::Tensor& features, const at::Tensor& features_batch_cnt,
                                      const at::Tensor& indices, const at::Tensor& indices_batch_cnt) {
  TORCH_CHECK(features.dim() == 2, kStackGroupPointsOp,
              "expected features to be a 2-D tensor [N1 + N2 + ..., C], but got shape ", shape_of(features));
  check_stacked(features, "features", features_batch_cnt, indices, indices_batch_cnt);
  check_point_count(kStackGroupPointsOp, "N", features.sym_size(0));
}

void check_stack_group_points_backward(const at::Tensor& grad_output, const at::Tensor& features_batch_cnt,
                                       const at::Tensor& indices, const at::Tensor& indices_batch_cnt,
                                       const c10::SymInt& n) {
  TORCH_CHECK(grad_output.dim() == 3, kStackGroupPointsOp,
              "expected grad_output to be a 3-D tensor [M, C, nsample], but got shape ", shape_of(grad_output));
  check_stacked(grad_output, "grad_output", features_batch_cnt, indices, indices_batch_cnt);
  TORCH_SYM_CHECK(
      grad_output.sym_size(0).sym_eq(indices.sym_size(0)).sym_and(grad_output.sym_size(2).sym_eq(indices.sym_size(1))),
      kStackGroupPointsOp, "expected grad_output of shape [", indices.sym_size(0), ", C, ", indices.sym_size(1),
      "], but got shape ", shape_of(grad_output));
  check_point_count(kStackGroupPointsOp, "n", n);
}

void check_point_indices(const char* op, const at::Tensor& indices, int64_t n) {
  if (indices.numel() == 0) {
    return;
  }
  const auto [min, max] = index_value_range(indices);
  TORCH_CHECK(min >= 0 && max < n, op, "expected every value of indices in [0, ", n,
              ") (N points), but got values in [", min, ", ", max, "]");
}

void check_stacked_indices(const at::Tensor& features_batch_cnt, const at::Tensor& indices,
                           const at::Tensor& indices_batch_cnt, int64_t n) {
  const char* op = kStackGroupPointsOp;
  const at::Tensor fcnt = features_batch_cnt.cpu().contiguous(), icnt = indices_batch_cnt.cpu().contiguous();
  const at::Tensor idx = indices.cpu().contiguous();
  const int32_t* fc = fcnt.const_data_ptr<int32_t>();
  const int32_t* ic = icnt.const_data_ptr<int32_t>();
  int64_t features = 0, rows = 0;
  for (int64_t b = 0; b < fcnt.numel(); ++b) {
    TORCH_CHECK(fc[b] >= 0 && ic[b] >= 0, op, "expected counts >= 0, but batch ", b, " has features_batch_cnt ", fc[b],
                " and indices_batch_cnt ", ic[b]);
    features += fc[b];
    rows += ic[b];
  }
  TORCH_CHECK(features == n, op, "expected features_batch_cnt to sum to the ", n, " features, but it sums to ",
              features);
  TORCH_CHECK(rows == idx.size(0), op, "expected indices_batch_cnt to sum to the ", idx.size(0),
              " rows of indices, but it sums to ", rows);
  const int32_t* values = idx.const_data_ptr<int32_t>();
  const int64_t samples = idx.size(1);
  int64_t row = 0;
  for (int64_t b = 0; b < icnt.numel(); ++b) {
    for (int64_t r = 0; r < ic[b]; ++r, ++row) {
      for (int64_t s = 0; s < samples; ++s) {
        const int32_t v = values[row * samples + s];
        TORCH_CHECK(v >= 0 && v < fc[b], op, "expected every index of batch ", b, " in [0, ", fc[b],
                    ") (its features_batch_cnt), but indices[", row, ", ", s, "] = ", v);
      }
    }
  }
}

} // namespace detail
} // namespace mmops
