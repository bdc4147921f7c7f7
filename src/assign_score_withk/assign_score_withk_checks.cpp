// Argument validation of assign_score_withk, on every backend (the meta
// kernels run it too, so fake tensors raise the same errors).

#include "assign_score_withk/assign_score_withk_ops.h"

#include "common/check_utils.h"
#include "common/index_policy.h"

#include <c10/core/SymInt.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kAssignScoreWithKOp;

// mmcv's aggregate argument: accepted and, as in mmcv's kernels, without effect.
enum class Aggregate { Sum, Avg, Max };
constexpr std::pair<const char*, Aggregate> kAggregates[] = {
    {"sum", Aggregate::Sum}, {"avg", Aggregate::Avg}, {"max", Aggregate::Max}};

void check_same(const at::Tensor& t, const char* name, const at::Tensor& scores) {
  TORCH_CHECK(t.scalar_type() == scores.scalar_type(), kOp, "expected ", name, " to have the dtype of scores (",
              scores.scalar_type(), "), but got ", t.scalar_type());
  TORCH_CHECK(t.device() == scores.device(), kOp, "expected ", name, " on the device of scores (", scores.device(),
              "), but got ", t.device());
}

AssignScoreWithKParams check_common(const at::Tensor& scores, const at::Tensor& point_features,
                                    const at::Tensor& center_features, const at::Tensor& knn_idx) {
  TORCH_CHECK(scores.dim() == 4, kOp, "expected scores to be a 4-D tensor [B, npoint, K, M], but got a ", scores.dim(),
              "-D tensor of shape ", shape_of(scores));
  TORCH_CHECK(at::isFloatingType(scores.scalar_type()), kOp, "expected scores to have a floating point dtype, but got ",
              scores.scalar_type());
  TORCH_CHECK(point_features.dim() == 4, kOp, "expected point_features to be a 4-D tensor [B, N, M, O], but got a ",
              point_features.dim(), "-D tensor of shape ", shape_of(point_features));
  check_same(point_features, "point_features", scores);
  check_same(center_features, "center_features", scores);
  const c10::SymInt &batch = scores.sym_size(0), &weights = scores.sym_size(3);
  TORCH_SYM_CHECK(point_features.sym_size(0).sym_eq(batch).sym_and(point_features.sym_size(2).sym_eq(weights)), kOp,
                  "expected point_features of shape [", batch, ", N, ", weights, ", O] (B and M of scores), but got ",
                  shape_of(point_features));
  TORCH_CHECK(center_features.sym_sizes() == point_features.sym_sizes(), kOp,
              "expected center_features of the shape of point_features (", shape_of(point_features), "), but got ",
              shape_of(center_features));
  TORCH_CHECK(knn_idx.dim() == 3, kOp, "expected knn_idx to be a 3-D tensor [B, npoint, K], but got a ", knn_idx.dim(),
              "-D tensor of shape ", shape_of(knn_idx));
  TORCH_CHECK(knn_idx.scalar_type() == at::kLong || knn_idx.scalar_type() == at::kInt, kOp,
              "expected knn_idx to have dtype int64 or int32, but got ", knn_idx.scalar_type());
  TORCH_CHECK(knn_idx.device() == scores.device(), kOp, "expected knn_idx on the device of scores (", scores.device(),
              "), but got ", knn_idx.device());
  TORCH_CHECK(knn_idx.sym_sizes() == scores.sym_sizes().slice(0, 3), kOp, "expected knn_idx of shape ",
              scores.sym_sizes().slice(0, 3), " (B, npoint, K of scores), but got ", shape_of(knn_idx));
  AssignScoreWithKParams p{};
  p.batch = int_or_unknown(batch);
  p.points = int_or_unknown(point_features.sym_size(1));
  p.centers = int_or_unknown(scores.sym_size(1));
  p.k = int_or_unknown(scores.sym_size(2));
  p.weights = int_or_unknown(weights);
  p.out_dim = int_or_unknown(point_features.sym_size(3));
  const std::vector<int64_t> out{p.batch, p.out_dim, p.centers, p.k};
  bool known = true;
  for (const int64_t s : out) {
    known = known && s >= 0;
  }
  if (known) {
    checked_product(kOp, "the output's element count (B * O * npoint * K)", out);
  }
  return p;
}

} // namespace

AssignScoreWithKParams check_assign_score_withk_forward(const at::Tensor& scores, const at::Tensor& point_features,
                                                        const at::Tensor& center_features, const at::Tensor& knn_idx,
                                                        c10::string_view aggregate) {
  parse_choice(kOp, "aggregate", aggregate, kAggregates);
  return check_common(scores, point_features, center_features, knn_idx);
}

AssignScoreWithKParams check_assign_score_withk_backward(const at::Tensor& grad_output, const at::Tensor& scores,
                                                         const at::Tensor& point_features,
                                                         const at::Tensor& center_features, const at::Tensor& knn_idx) {
  const AssignScoreWithKParams p = check_common(scores, point_features, center_features, knn_idx);
  check_same(grad_output, "grad_output", scores);
  const std::vector<c10::SymInt> expected{scores.sym_size(0), point_features.sym_size(3), scores.sym_size(1),
                                          scores.sym_size(2)};
  TORCH_CHECK(grad_output.sym_sizes() == c10::SymIntArrayRef(expected), kOp, "expected grad_output of shape ",
              c10::SymIntArrayRef(expected), " ([B, O, npoint, K]), but got ", shape_of(grad_output));
  return p;
}

void check_assign_score_withk_indices(const at::Tensor& knn_idx, int64_t points) {
  if (knn_idx.numel() == 0) {
    return;
  }
  const auto [min, max] = index_value_range(knn_idx);
  TORCH_CHECK(min >= 0 && max < points, kOp, "expected every value of knn_idx in [0, ", points,
              ") (the rows of point_features), but got values in [", min, ", ", max, "]");
}

} // namespace detail
} // namespace mmops
