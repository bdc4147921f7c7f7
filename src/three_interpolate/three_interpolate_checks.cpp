// Argument validation of three_interpolate, on every backend (the meta
// kernels run it too, so fake tensors raise the same errors).

#include "three_interpolate/three_interpolate_ops.h"

#include "common/check_utils.h"
#include "common/index_policy.h"

#include <c10/core/ScalarType.h>

#include <limits>

namespace mmops {
namespace detail {

void check_three_interpolate(const at::Tensor& features, const at::Tensor& indices, const at::Tensor& weight) {
  constexpr const char* kOp = kThreeInterpolateOp;
  TORCH_CHECK(features.dim() == 3, kOp, "expected features to be a 3-D tensor [B, C, M], but got shape ",
              shape_of(features));
  TORCH_CHECK(at::isFloatingType(features.scalar_type()), kOp,
              "expected features to have a floating point dtype, but got ", features.scalar_type());
  TORCH_CHECK(indices.dim() == 3 && indices.sym_size(2) == 3, kOp,
              "expected indices to be a 3-D tensor of shape [B, N, 3], but got shape ", shape_of(indices));
  TORCH_CHECK(indices.scalar_type() == at::kInt, kOp, "expected indices to be int32, but got ", indices.scalar_type());
  TORCH_SYM_CHECK(indices.sym_size(0).sym_eq(features.sym_size(0)), kOp,
                  "expected indices to have the batch size of features (", features.sym_size(0), "), but got shape ",
                  shape_of(indices));
  TORCH_CHECK(weight.sym_sizes() == indices.sym_sizes(), kOp, "expected weight to have the shape of indices (",
              shape_of(indices), "), but got ", shape_of(weight));
  TORCH_CHECK(weight.scalar_type() == features.scalar_type(), kOp, "expected weight to have the dtype of features (",
              features.scalar_type(), "), but got ", weight.scalar_type());
  TORCH_CHECK(indices.device() == features.device() && weight.device() == features.device(), kOp,
              "expected indices and weight on the device of features (", features.device(), "), but got ",
              indices.device(), " and ", weight.device());
  TORCH_SYM_CHECK(features.sym_size(2).sym_le(std::numeric_limits<int32_t>::max()), kOp,
                  "expected at most 2^31 - 1 sources M in features (indices are int32), but got ",
                  features.sym_size(2));
}

void check_three_interpolate_backward(const at::Tensor& grad_output, const at::Tensor& features,
                                      const at::Tensor& indices, const at::Tensor& weight) {
  check_three_interpolate(features, indices, weight);
  constexpr const char* kOp = kThreeInterpolateOp;
  TORCH_CHECK(grad_output.dim() == 3 && grad_output.sym_size(0) == features.sym_size(0) &&
                  grad_output.sym_size(1) == features.sym_size(1) && grad_output.sym_size(2) == indices.sym_size(1),
              kOp, "expected grad_output of shape [B, C, N] = [", features.sym_size(0), ", ", features.sym_size(1),
              ", ", indices.sym_size(1), "], but got ", shape_of(grad_output));
  TORCH_CHECK(grad_output.scalar_type() == features.scalar_type() && grad_output.device() == features.device(), kOp,
              "expected grad_output as ", features.scalar_type(), " on ", features.device(), ", but got ",
              grad_output.scalar_type(), " on ", grad_output.device());
}

void check_three_interpolate_indices(const at::Tensor& indices, int64_t m) {
  if (indices.numel() == 0 || !should_validate_indices(indices)) {
    return;
  }
  const at::Tensor values = indices.to(at::kCPU).contiguous();
  const int32_t* v = values.const_data_ptr<int32_t>();
  const int64_t n = values.size(1);
  for (int64_t e = 0; e < values.numel(); ++e) {
    TORCH_CHECK(v[e] >= 0 && v[e] < m, kThreeInterpolateOp,
                "indices must lie in [0, M) with M = features.size(2) = ", m, ", but indices[", e / (3 * n), ", ",
                (e / 3) % n, ", ", e % 3, "] = ", v[e]);
  }
}

} // namespace detail
} // namespace mmops
