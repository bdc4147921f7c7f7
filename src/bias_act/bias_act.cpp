// mmops::bias_act: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation and the activation table are in
// bias_act_checks.cpp, kernels in kernels/bias_act, the meta functions in
// bias_act_meta.cpp and autograd (first and second order) in
// bias_act_autograd.cpp.

#include "bias_act/bias_act_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/bias_act.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "bias_act(Tensor input, Tensor? bias=None, int dim=1, str act=\"linear\", float? alpha=None, "
            "float? gain=None, float? clamp=None) -> Tensor");
  // The gradient of input (order 1) or its derivative w.r.t. input (order 2, for
  // the double backward), alpha / gain resolved and clamp < 0 for none; reads
  // output for the acts whose derivative follows from it and input (+ bias) for
  // swish. Differentiable w.r.t. grad_output (linear) and, at order 1, w.r.t.
  // input and bias along output = bias_act(input, bias) (the total derivative;
  // output gets none).
  define_op(m,
            "_bias_act_backward(Tensor grad_output, Tensor? input, Tensor? bias, Tensor? output, int dim, str act, "
            "float alpha, float gain, float clamp, int order=1) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& input, const std::optional<at::Tensor>& bias, int64_t dim,
                         c10::string_view act, std::optional<double> alpha, std::optional<double> gain,
                         std::optional<double> clamp) {
  const BiasActParams p = detail::check_bias_act_forward(input, bias, dim, act, alpha, gain, clamp);
  return Kernel(input, bias, p);
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const std::optional<at::Tensor>& input,
                          const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& output, int64_t dim,
                          c10::string_view act, double alpha, double gain, double clamp, int64_t order) {
  const BiasActParams p =
      detail::check_bias_act_backward(grad_output, input, bias, output, dim, act, alpha, gain, clamp, order);
  return Kernel(grad_output, input, bias, output, p);
}

} // namespace

at::Tensor bias_act(const at::Tensor& input, const std::optional<at::Tensor>& bias, int64_t dim, c10::string_view act,
                    std::optional<double> alpha, std::optional<double> gain, std::optional<double> clamp) {
  static const auto op = detail::op_handle<BiasActFn>("mmops::bias_act");
  return op.call(input, bias, dim, act, alpha, gain, clamp);
}

} // namespace mmops

#define MMOPS_BIAS_ACT_ENTRIES(m, device)                                 \
  m.impl("bias_act", &forward_entry<kernels::bias_act_forward_##device>); \
  m.impl("_bias_act_backward", &backward_entry<kernels::bias_act_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_BIAS_ACT_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "bias_act")
