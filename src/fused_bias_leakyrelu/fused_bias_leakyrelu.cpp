// mmops::fused_bias_leakyrelu: schemas, device entries (CPU/CUDA registration)
// and the public C++ API. Validation is in fused_bias_leakyrelu_checks.cpp,
// kernels in kernels/fused_bias_leakyrelu, the meta functions in
// fused_bias_leakyrelu_meta.cpp and autograd (to any order) in
// fused_bias_leakyrelu_autograd.cpp.

#include "fused_bias_leakyrelu/fused_bias_leakyrelu_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/fused_bias_leakyrelu.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "fused_bias_leakyrelu(Tensor input, Tensor bias, float negative_slope=0.2, "
            "float scale=1.4142135623730951) -> Tensor");
  // The gradient of input from the forward's output (mmcv's rule); differentiable
  // again w.r.t. grad_output (autograd), so the op has gradients of any order.
  define_op(m,
            "_fused_bias_leakyrelu_backward(Tensor grad_output, Tensor output, float negative_slope, float scale) "
            "-> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& input, const at::Tensor& bias, double negative_slope, double scale) {
  const FusedBiasLeakyReLUParams p = detail::check_fused_bias_leakyrelu_forward(input, bias, negative_slope, scale);
  return Kernel(input, bias, p);
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& output, double negative_slope,
                          double scale) {
  const FusedBiasLeakyReLUParams p =
      detail::check_fused_bias_leakyrelu_backward(grad_output, output, negative_slope, scale);
  return Kernel(grad_output, output, p);
}

} // namespace

at::Tensor fused_bias_leakyrelu(const at::Tensor& input, const at::Tensor& bias, double negative_slope, double scale) {
  static const auto op = detail::op_handle<FusedBiasLeakyReLUFn>("mmops::fused_bias_leakyrelu");
  return op.call(input, bias, negative_slope, scale);
}

} // namespace mmops

#define MMOPS_FUSED_BIAS_LEAKYRELU_ENTRIES(m, device)                                             \
  m.impl("fused_bias_leakyrelu", &forward_entry<kernels::fused_bias_leakyrelu_forward_##device>); \
  m.impl("_fused_bias_leakyrelu_backward", &backward_entry<kernels::fused_bias_leakyrelu_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_FUSED_BIAS_LEAKYRELU_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "fused_bias_leakyrelu")
