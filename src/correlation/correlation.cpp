// mmops::correlation: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation is in correlation_checks.cpp, kernels in
// kernels/correlation, the meta functions in correlation_meta.cpp and autograd
// in correlation_autograd.cpp.

#include "correlation/correlation_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/correlation.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "correlation(Tensor input1, Tensor input2, int[2] kernel_size=[1, 1], int max_displacement=1, "
            "int[2] stride=[1, 1], int[2] padding=[0, 0], int[2] dilation=[1, 1], int[2] dilation_patch=[1, 1]) "
            "-> Tensor");
  define_op(m,
            "_correlation_backward(Tensor grad_output, Tensor input1, Tensor input2, int[2] kernel_size, "
            "int max_displacement, int[2] stride, int[2] padding, int[2] dilation, int[2] dilation_patch) "
            "-> (Tensor grad_input1, Tensor grad_input2)");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& input1, const at::Tensor& input2, c10::IntArrayRef kernel_size,
                         int64_t max_displacement, c10::IntArrayRef stride, c10::IntArrayRef padding,
                         c10::IntArrayRef dilation, c10::IntArrayRef dilation_patch) {
  const detail::CorrelationOptions o{kernel_size, max_displacement, stride, padding, dilation, dilation_patch};
  return Kernel(input1, input2, detail::check_correlation_forward(input1, input2, o));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> backward_entry(const at::Tensor& grad_output, const at::Tensor& input1,
                                                  const at::Tensor& input2, c10::IntArrayRef kernel_size,
                                                  int64_t max_displacement, c10::IntArrayRef stride,
                                                  c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                  c10::IntArrayRef dilation_patch) {
  const detail::CorrelationOptions o{kernel_size, max_displacement, stride, padding, dilation, dilation_patch};
  return Kernel(grad_output, input1, input2, detail::check_correlation_backward(grad_output, input1, input2, o));
}

} // namespace

at::Tensor correlation(const at::Tensor& input1, const at::Tensor& input2, c10::IntArrayRef kernel_size,
                       int64_t max_displacement, c10::IntArrayRef stride, c10::IntArrayRef padding,
                       c10::IntArrayRef dilation, c10::IntArrayRef dilation_patch) {
  static const auto op = detail::op_handle<CorrelationFn>("mmops::correlation");
  return op.call(input1, input2, kernel_size, max_displacement, stride, padding, dilation, dilation_patch);
}

} // namespace mmops

#define MMOPS_CORRELATION_ENTRIES(m, device)                                    \
  m.impl("correlation", &forward_entry<kernels::correlation_forward_##device>); \
  m.impl("_correlation_backward", &backward_entry<kernels::correlation_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_CORRELATION_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "correlation")
