// Meta (shape and dtype only) kernels of correlation, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "correlation/correlation_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor correlation_meta(const at::Tensor& input1, const at::Tensor& input2, c10::IntArrayRef kernel_size,
                            int64_t max_displacement, c10::IntArrayRef stride, c10::IntArrayRef padding,
                            c10::IntArrayRef dilation, c10::IntArrayRef dilation_patch) {
  const detail::CorrelationOptions o{kernel_size, max_displacement, stride, padding, dilation, dilation_patch};
  detail::check_correlation_forward(input1, input2, o);
  return at::empty_symint(detail::correlation_output_shape(input1, o), input1.options());
}

std::tuple<at::Tensor, at::Tensor> backward_meta(const at::Tensor& grad_output, const at::Tensor& input1,
                                                 const at::Tensor& input2, c10::IntArrayRef kernel_size,
                                                 int64_t max_displacement, c10::IntArrayRef stride,
                                                 c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                 c10::IntArrayRef dilation_patch) {
  const detail::CorrelationOptions o{kernel_size, max_displacement, stride, padding, dilation, dilation_patch};
  detail::check_correlation_backward(grad_output, input1, input2, o);
  return {at::empty_symint(input1.sym_sizes(), input1.options()),
          at::empty_symint(input2.sym_sizes(), input2.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("correlation", &mmops::correlation_meta);
  m.impl("_correlation_backward", &mmops::backward_meta);
}
