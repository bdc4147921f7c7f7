// Argument validation of active_rotated_filter, on every backend (the meta
// kernels run it too, so fake tensors raise the same errors).

#include "active_rotated_filter/active_rotated_filter_ops.h"

#include "common/check_utils.h"
#include "common/index_policy.h"

#include <c10/core/SymInt.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kActiveRotatedFilterOp;

// indices [O, kH, kW, R] against the weight sizes (O, kH, kW).
ActiveRotatedFilterParams check_indices(const at::Tensor& indices, c10::SymIntArrayRef weight,
                                        const char* weight_name) {
  TORCH_CHECK(indices.dim() == 4, kOp, "expected indices to be a 4-D tensor [orientations, kH, kW, rotations], ",
              "but got a ", indices.dim(), "-D tensor of shape ", shape_of(indices));
  TORCH_CHECK(at::isIntegralType(indices.scalar_type(), /*includeBool=*/false), kOp,
              "expected indices to have an integer dtype, but got ", indices.scalar_type());
  TORCH_SYM_CHECK(indices.sym_size(0)
                      .sym_eq(weight[2])
                      .sym_and(indices.sym_size(1).sym_eq(weight[3]))
                      .sym_and(indices.sym_size(2).sym_eq(weight[4])),
                  kOp, "expected indices of shape [", weight[2], ", ", weight[3], ", ", weight[4],
                  ", rotations] (orientations, kH, kW of ", weight_name, "), but got ", shape_of(indices));
  const c10::SymInt entries = weight[2] * weight[3] * weight[4];
  TORCH_SYM_CHECK(entries.sym_le(std::numeric_limits<int32_t>::max()), kOp,
                  "expected orientations * kH * kW < 2^31 (the index tables are int32), but got ", entries);
  ActiveRotatedFilterParams p{};
  p.out_planes = int_or_unknown(weight[0]);
  p.in_planes = int_or_unknown(weight[1]);
  p.orientations = int_or_unknown(weight[2]);
  p.kernel_h = int_or_unknown(weight[3]);
  p.kernel_w = int_or_unknown(weight[4]);
  p.rotations = int_or_unknown(indices.sym_size(3));
  p.entries = int_or_unknown(entries);
  return p;
}

// The output's element count fits in int64 (checked once the sizes are known).
void check_output_numel(const ActiveRotatedFilterParams& p) {
  const std::vector<int64_t> sizes{p.out_planes, p.rotations, p.in_planes, p.entries};
  for (const int64_t s : sizes) {
    if (s < 0) {
      return; // symbolic
    }
  }
  checked_product(kOp, "the output's element count", sizes);
}

} // namespace

ActiveRotatedFilterParams check_active_rotated_filter_forward(const at::Tensor& input, const at::Tensor& indices) {
  TORCH_CHECK(input.dim() == 5, kOp,
              "expected input to be a 5-D tensor [out_planes, in_planes, orientations, kH, kW], but got a ",
              input.dim(), "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  TORCH_CHECK(indices.device() == input.device(), kOp, "expected indices on the device of input (", input.device(),
              "), but got ", indices.device());
  const ActiveRotatedFilterParams p = check_indices(indices, input.sym_sizes(), "input");
  check_output_numel(p);
  return p;
}

ActiveRotatedFilterParams check_active_rotated_filter_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                                               c10::SymIntArrayRef input_size) {
  TORCH_CHECK(input_size.size() == 5, kOp, "expected input_size to hold 5 values, but got ", input_size.size());
  for (const c10::SymInt& s : input_size) {
    TORCH_SYM_CHECK(s.sym_ge(0), kOp, "expected input_size to be non-negative, but got ", input_size);
  }
  TORCH_CHECK(at::isFloatingType(grad_output.scalar_type()), kOp,
              "expected grad_output to have a floating point dtype, but got ", grad_output.scalar_type());
  TORCH_CHECK(indices.device() == grad_output.device(), kOp, "expected indices on the device of grad_output (",
              grad_output.device(), "), but got ", indices.device());
  const ActiveRotatedFilterParams p = check_indices(indices, input_size, "input_size");
  const std::vector<c10::SymInt> expected{input_size[0] * indices.sym_size(3), input_size[1] * input_size[2],
                                          input_size[3], input_size[4]};
  TORCH_CHECK(grad_output.sym_sizes() == c10::SymIntArrayRef(expected), kOp, "expected grad_output of shape ",
              c10::SymIntArrayRef(expected), ", but got ", shape_of(grad_output));
  check_output_numel(p);
  return p;
}

void check_active_rotated_filter_indices(const at::Tensor& indices, int64_t entries) {
  if (indices.numel() == 0) {
    return;
  }
  const auto [min, max] = index_value_range(indices.to(at::kLong));
  TORCH_CHECK(min >= 1 && max <= entries, kOp, "expected every value of indices in [1, ", entries,
              "] (orientations * kH * kW, 1-based as mmcv), but got values in [", min, ", ", max, "]");
}

} // namespace detail
} // namespace mmops
