// Meta (shape and dtype only) kernels of filtered_lrelu, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "filtered_lrelu/filtered_lrelu_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor filtered_lrelu_meta(const at::Tensor& input, const at::Tensor& filter_up, const at::Tensor& filter_down,
                               const std::optional<at::Tensor>& bias, int64_t up, int64_t down,
                               c10::SymIntArrayRef padding, double gain, double slope, std::optional<double> clamp) {
  detail::FilteredLreluShape s;
  detail::check_filtered_lrelu_forward(input, filter_up, filter_down, bias, up, down, padding, gain, slope, clamp, &s);
  return at::empty_symint({s.batch, s.channels, s.out_h, s.out_w}, input.options());
}

std::tuple<at::Tensor, at::Tensor> filtered_lrelu_forward_meta(const at::Tensor& input, const at::Tensor& filter_up,
                                                               const at::Tensor& filter_down,
                                                               const std::optional<at::Tensor>& bias, int64_t up,
                                                               int64_t down, c10::SymIntArrayRef padding, double gain,
                                                               double slope, std::optional<double> clamp) {
  detail::FilteredLreluShape s;
  detail::check_filtered_lrelu_forward(input, filter_up, filter_down, bias, up, down, padding, gain, slope, clamp, &s);
  return {at::empty_symint({s.batch, s.channels, s.out_h, s.out_w}, input.options()),
          at::empty_symint({s.batch, s.channels, s.mid_h, s.mid_w}, input.options().dtype(at::kByte))};
}

at::Tensor filtered_lrelu_backward_meta(const at::Tensor& grad, const at::Tensor& mask, const at::Tensor& filter_up,
                                        const at::Tensor& filter_down, int64_t up, int64_t down,
                                        c10::SymIntArrayRef padding, double gain, double slope,
                                        c10::SymIntArrayRef input_size, bool transpose) {
  detail::FilteredLreluShape s;
  detail::check_filtered_lrelu_backward(grad, mask, filter_up, filter_down, up, down, padding, gain, slope, input_size,
                                        transpose, &s);
  return transpose ? at::empty_symint({s.batch, s.channels, s.out_h, s.out_w}, grad.options())
                   : at::empty_symint({s.batch, s.channels, s.in_h, s.in_w}, grad.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("filtered_lrelu", &mmops::filtered_lrelu_meta);
  m.impl("_filtered_lrelu_forward", &mmops::filtered_lrelu_forward_meta);
  m.impl("_filtered_lrelu_backward", &mmops::filtered_lrelu_backward_meta);
}
