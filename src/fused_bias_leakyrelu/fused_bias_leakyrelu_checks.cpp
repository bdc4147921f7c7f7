// Argument validation of fused_bias_leakyrelu, on every backend (the meta
// kernels run it too, so fake tensors raise the same errors).

#include "fused_bias_leakyrelu/fused_bias_leakyrelu_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kFusedBiasLeakyReLUOp;

void check_floats(double negative_slope, double scale) {
  TORCH_CHECK(std::isfinite(negative_slope), kOp, "expected a finite negative_slope, but got ", negative_slope);
  TORCH_CHECK(std::isfinite(scale), kOp, "expected a finite scale, but got ", scale);
}

// The params of a tensor [N, C, *] (its dims after 1 flattened into `inner`).
FusedBiasLeakyReLUParams params_of(const at::Tensor& t, double negative_slope, double scale) {
  FusedBiasLeakyReLUParams p{};
  p.channels = int_or_unknown(t.sym_size(1));
  p.inner = 1;
  for (int64_t d = 2; d < t.dim(); ++d) {
    const int64_t s = int_or_unknown(t.sym_size(d));
    p.inner = s < 0 || p.inner < 0 ? -1 : p.inner * s; // <= numel of an existing tensor: no overflow
  }
  p.negative_slope = negative_slope;
  p.scale = scale;
  return p;
}

} // namespace

FusedBiasLeakyReLUParams check_fused_bias_leakyrelu_forward(const at::Tensor& input, const at::Tensor& bias,
                                                            double negative_slope, double scale) {
  TORCH_CHECK(input.dim() >= 2, kOp, "expected input to be a tensor [N, C, *] of at least 2 dims, but got a ",
              input.dim(), "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  TORCH_CHECK(bias.dim() == 1, kOp, "expected bias to be a 1-D tensor [C], but got a ", bias.dim(),
              "-D tensor of shape ", shape_of(bias));
  TORCH_CHECK(bias.scalar_type() == input.scalar_type(), kOp, "expected bias to have the dtype of input (",
              input.scalar_type(), "), but got ", bias.scalar_type());
  TORCH_CHECK(bias.device() == input.device(), kOp, "expected bias on the device of input (", input.device(),
              "), but got ", bias.device());
  TORCH_SYM_CHECK(bias.sym_size(0).sym_eq(input.sym_size(1)), kOp, "expected bias to hold C = ", input.sym_size(1),
                  " values (input's dim 1), but got bias of shape ", shape_of(bias));
  check_floats(negative_slope, scale);
  return params_of(input, negative_slope, scale);
}

FusedBiasLeakyReLUParams check_fused_bias_leakyrelu_backward(const at::Tensor& grad_output, const at::Tensor& output,
                                                             double negative_slope, double scale) {
  TORCH_CHECK(grad_output.dim() >= 2, kOp,
              "expected grad_output to be a tensor [N, C, *] of at least 2 dims, but got a ", grad_output.dim(),
              "-D tensor of shape ", shape_of(grad_output));
  TORCH_CHECK(at::isFloatingType(grad_output.scalar_type()), kOp,
              "expected grad_output to have a floating point dtype, but got ", grad_output.scalar_type());
  TORCH_CHECK(output.scalar_type() == grad_output.scalar_type() && output.device() == grad_output.device(), kOp,
              "expected output with the dtype and device of grad_output (", grad_output.scalar_type(), " on ",
              grad_output.device(), "), but got ", output.scalar_type(), " on ", output.device());
  TORCH_CHECK(output.sym_sizes() == grad_output.sym_sizes(), kOp, "expected output of shape ", shape_of(grad_output),
              " (as grad_output), but got ", shape_of(output));
  check_floats(negative_slope, scale);
  return params_of(grad_output, negative_slope, scale);
}

} // namespace detail
} // namespace mmops
