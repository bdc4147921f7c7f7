// mmops::deform_conv2d (DCNv1) and mmops::modulated_deform_conv2d (DCNv2):
// schemas, CPU/CUDA registration and the public C++ API. Both are one
// implementation with an optional mask underneath (kernels/deform_conv);
// validation is in deform_conv_checks.cpp, the meta (shape) functions in
// deform_conv_meta.cpp and autograd in deform_conv_autograd.cpp.

#include "common/autocast.h"
#include "common/dispatch.h"
#include "deform_conv/deform_conv_ops.h"

#include <mmops/deform_conv.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  mmops::detail::define_op(
      m,
      "deform_conv2d(Tensor input, Tensor offset, Tensor weight, Tensor? bias=None, "
      "SymInt[2] stride=[1, 1], SymInt[2] padding=[0, 0], SymInt[2] dilation=[1, 1], int groups=1, "
      "int deform_groups=1) -> Tensor");
  mmops::detail::define_op(
      m,
      "modulated_deform_conv2d(Tensor input, Tensor offset, Tensor mask, Tensor weight, Tensor? bias=None, "
      "SymInt[2] stride=[1, 1], SymInt[2] padding=[0, 0], SymInt[2] dilation=[1, 1], int groups=1, "
      "int deform_groups=1) -> Tensor");
  // Gradients (input, offset, mask, weight, bias) of both ops; output_mask
  // selects them, and those not selected (and grad_mask without a mask) are
  // empty [0] tensors. The bias gradient is grad_output summed over N, H, W.
  define_op(m,
            "_deform_conv2d_backward(Tensor grad_output, Tensor input, Tensor offset, Tensor? mask, "
            "Tensor weight, SymInt[2] stride, SymInt[2] padding, SymInt[2] dilation, int groups, "
            "int deform_groups, bool[5] output_mask) -> (Tensor grad_input, Tensor grad_offset, "
            "Tensor grad_mask, Tensor grad_weight, Tensor grad_bias)");
}

namespace mmops {
namespace {

at::Tensor value_or_undefined(const std::optional<at::Tensor>& t) {
  return t.has_value() ? *t : at::Tensor();
}

// The device entries: validation (as the meta kernels), then the kernel (CPU
// or CUDA). There are no indices in tensor data, so no index policy.

template <auto Kernel>
at::Tensor deform_conv2d_entry(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                               c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups,
                               int64_t deform_groups) {
  const detail::DeformConvChecked c =
      detail::check_deform_conv2d(input, offset, weight, bias, stride, padding, dilation, groups, deform_groups);
  return Kernel(input, offset, at::Tensor(), weight, value_or_undefined(bias), c.params);
}

template <auto Kernel>
at::Tensor modulated_deform_conv2d_entry(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                                         const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                         c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                         c10::SymIntArrayRef dilation, int64_t groups, int64_t deform_groups) {
  const detail::DeformConvChecked c = detail::check_modulated_deform_conv2d(input, offset, mask, weight, bias, stride,
                                                                            padding, dilation, groups, deform_groups);
  return Kernel(input, offset, mask, weight, value_or_undefined(bias), c.params);
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward_entry(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& offset,
    const std::optional<at::Tensor>& mask, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups, int64_t deform_groups,
    std::array<bool, 5> output_mask) {
  const detail::DeformConvChecked c = detail::check_deform_conv2d_backward(
      grad_output, input, offset, mask, weight, stride, padding, dilation, groups, deform_groups);
  return Kernel(grad_output, input, offset, value_or_undefined(mask), weight, c.params, output_mask);
}

} // namespace

at::Tensor deform_conv2d(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                         at::IntArrayRef dilation, int64_t groups, int64_t deform_groups) {
  static const auto op = detail::op_handle<DeformConv2dFn>("mmops::deform_conv2d");
  return op.call(input, offset, weight, bias, c10::fromIntArrayRefSlow(stride), c10::fromIntArrayRefSlow(padding),
                 c10::fromIntArrayRefSlow(dilation), groups, deform_groups);
}

at::Tensor modulated_deform_conv2d(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                                   const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                   at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                   int64_t groups, int64_t deform_groups) {
  static const auto op = detail::op_handle<ModulatedDeformConv2dFn>("mmops::modulated_deform_conv2d");
  return op.call(input, offset, mask, weight, bias, c10::fromIntArrayRefSlow(stride), c10::fromIntArrayRefSlow(padding),
                 c10::fromIntArrayRefSlow(dilation), groups, deform_groups);
}

} // namespace mmops

#define MMOPS_DEFORM_CONV_ENTRIES(m, device)                                                                  \
  m.impl("deform_conv2d", &deform_conv2d_entry<kernels::deform_conv2d_forward_##device>);                     \
  m.impl("modulated_deform_conv2d", &modulated_deform_conv2d_entry<kernels::deform_conv2d_forward_##device>); \
  m.impl("_deform_conv2d_backward", &backward_entry<kernels::deform_conv2d_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_DEFORM_CONV_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "deform_conv2d", "modulated_deform_conv2d")
