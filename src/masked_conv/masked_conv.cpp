// mmops::masked_conv2d: schemas, device entries (CPU/CUDA registration) and
// the public C++ API. Validation is in masked_conv_checks.cpp, kernels in
// kernels/masked_conv, the meta (shape) functions in masked_conv_meta.cpp and
// autograd in masked_conv_autograd.cpp.

#include "masked_conv/masked_conv_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/masked_conv.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "masked_conv2d(Tensor input, Tensor mask, Tensor weight, Tensor? bias=None, int[2] padding=[0, 0], "
            "int[2] stride=[1, 1]) -> Tensor");
  // Gradients (input, weight, bias); output_mask selects them, those not
  // selected are empty [0] tensors. The mask gets no gradient.
  define_op(m,
            "_masked_conv2d_backward(Tensor grad_output, Tensor input, Tensor mask, Tensor weight, int[2] padding, "
            "int[2] stride, bool[3] output_mask) -> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel (CPU
// or CUDA). The only data the kernels read for indexing is mask > 0, whose
// positions come from nonzero over the output grid: no index policy needed.

template <auto Kernel>
at::Tensor masked_conv2d_entry(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef padding, at::IntArrayRef stride) {
  const detail::MaskedConvChecked c = detail::check_masked_conv2d(input, mask, weight, bias, padding, stride);
  return Kernel(input, mask, weight, bias.has_value() ? *bias : at::Tensor(), c.params);
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_entry(const at::Tensor& grad_output, const at::Tensor& input,
                                                              const at::Tensor& mask, const at::Tensor& weight,
                                                              at::IntArrayRef padding, at::IntArrayRef stride,
                                                              std::array<bool, 3> output_mask) {
  const detail::MaskedConvChecked c =
      detail::check_masked_conv2d_backward(grad_output, input, mask, weight, padding, stride);
  return Kernel(grad_output, input, mask, weight, c.params, output_mask);
}

} // namespace

at::Tensor masked_conv2d(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias, at::IntArrayRef padding, at::IntArrayRef stride) {
  static const auto op = detail::op_handle<MaskedConv2dFn>("mmops::masked_conv2d");
  return op.call(input, mask, weight, bias, padding, stride);
}

} // namespace mmops

#define MMOPS_MASKED_CONV_ENTRIES(m, device)                                              \
  m.impl("masked_conv2d", &masked_conv2d_entry<kernels::masked_conv2d_forward_##device>); \
  m.impl("_masked_conv2d_backward", &backward_entry<kernels::masked_conv2d_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_MASKED_CONV_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "masked_conv2d")
