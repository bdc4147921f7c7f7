// Meta (shape and dtype only) kernels of bias_act, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic; the results take the
// memory format the device kernels give them (bias_act_kernels.h).

#include "bias_act/bias_act_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor bias_act_meta(const at::Tensor& input, const std::optional<at::Tensor>& bias, int64_t dim,
                         c10::string_view act, std::optional<double> alpha, std::optional<double> gain,
                         std::optional<double> clamp) {
  detail::check_bias_act_forward(input, bias, dim, act, alpha, gain, clamp);
  return at::empty_symint(input.sym_sizes(), input.options(), input.suggest_memory_format());
}

at::Tensor bias_act_backward_meta(const at::Tensor& grad_output, const std::optional<at::Tensor>& input,
                                  const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output,
                                  int64_t dim, c10::string_view act, double alpha, double gain, double clamp,
                                  int64_t order) {
  detail::check_bias_act_backward(grad_output, input, bias, output, dim, act, alpha, gain, clamp, order);
  return at::empty_symint(grad_output.sym_sizes(), grad_output.options(),
                          kernels::backward_memory_format(grad_output, input, output));
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("bias_act", &mmops::bias_act_meta);
  m.impl("_bias_act_backward", &mmops::bias_act_backward_meta);
}
