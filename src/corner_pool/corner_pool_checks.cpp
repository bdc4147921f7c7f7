// Argument validation of corner_pool, on every backend (the meta kernels run
// it too, so fake tensors raise the same errors).

#include "corner_pool/corner_pool_ops.h"

#include "common/check_utils.h"

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kCornerPoolOp;

void check_feature_map(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.dim() == 4, kOp, "expected ", name, " to be a 4-D tensor [N, C, H, W], but got a ", t.dim(),
              "-D tensor of shape ", shape_of(t));
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), kOp, "expected ", name,
              " to have a floating point dtype (float32, float64, float16 or bfloat16), but got ", t.scalar_type());
}

CornerPoolParams params_of(const at::Tensor& input, c10::string_view mode) {
  CornerPoolParams p{};
  p.mode = parse_choice(kOp, "mode", mode, kCornerPoolModes);
  p.batch = int_or_unknown(input.sym_size(0));
  p.channels = int_or_unknown(input.sym_size(1));
  p.height = int_or_unknown(input.sym_size(2));
  p.width = int_or_unknown(input.sym_size(3));
  return p;
}

} // namespace

CornerPoolParams check_corner_pool_forward(const at::Tensor& input, c10::string_view mode) {
  check_feature_map(input, "input");
  return params_of(input, mode);
}

CornerPoolParams check_corner_pool_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                            c10::string_view mode) {
  check_feature_map(input, "input");
  check_feature_map(grad_output, "grad_output");
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(), kOp, "expected grad_output to have input's dtype ",
              input.scalar_type(), ", but got ", grad_output.scalar_type());
  TORCH_CHECK(grad_output.device() == input.device(), kOp, "expected grad_output on input's device ", input.device(),
              ", but got ", grad_output.device());
  TORCH_CHECK(grad_output.sym_sizes() == input.sym_sizes(), kOp, "expected grad_output to have input's shape ",
              shape_of(input), ", but got ", shape_of(grad_output));
  return params_of(input, mode);
}

} // namespace detail
} // namespace mmops
