// mmops::filtered_lrelu: schemas, device entries (CPU/CUDA registration) and
// the public C++ API. Validation is in filtered_lrelu_checks.cpp, kernels in
// kernels/filtered_lrelu, the meta functions in filtered_lrelu_meta.cpp and
// autograd (the gradient of input and bias, differentiable again w.r.t. the
// incoming gradient to any order) in filtered_lrelu_autograd.cpp.

#include "filtered_lrelu/filtered_lrelu_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/filtered_lrelu.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  // padding = [pad_x0, pad_x1, pad_y0, pad_y1] (mmcv's order); the filters are taken as they
  // are (a convolution; no gain): the Python wrapper applies mmcv's flip_filter, the up ** 2
  // gain of filter_up and the separable / None filters.
  define_op(m,
            "filtered_lrelu(Tensor input, Tensor filter_up, Tensor filter_down, Tensor? bias=None, int up=1, "
            "int down=1, SymInt[4] padding=0, float gain=1.4142135623730951, float slope=0.2, float? clamp=None) "
            "-> Tensor");
  // The same, returning the mask the backward reads too: one uint8 code per sample of the
  // intermediate grid [N, C, mid_h, mid_w] (0: gain, 1: gain * slope, 2: clamped, 0).
  define_op(m,
            "_filtered_lrelu_forward(Tensor input, Tensor filter_up, Tensor filter_down, Tensor? bias, int up, "
            "int down, SymInt[4] padding, float gain, float slope, float? clamp) -> (Tensor, Tensor)");
  // transpose false: the gradient of input for the gradient of the output, grad [N, C, out_h,
  // out_w] -> [N, C, H, W]; true: its adjoint (the double backward), grad [N, C, H, W] ->
  // [N, C, out_h, out_w]. Linear in grad; each is the other's gradient.
  define_op(m,
            "_filtered_lrelu_backward(Tensor grad, Tensor mask, Tensor filter_up, Tensor filter_down, int up, "
            "int down, SymInt[4] padding, float gain, float slope, SymInt[2] input_size, bool transpose=False) "
            "-> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel (CPU or CUDA).

template <auto Kernel>
at::Tensor public_entry(const at::Tensor& input, const at::Tensor& filter_up, const at::Tensor& filter_down,
                        const std::optional<at::Tensor>& bias, int64_t up, int64_t down, c10::SymIntArrayRef padding,
                        double gain, double slope, std::optional<double> clamp) {
  const FilteredLreluParams p = detail::check_filtered_lrelu_forward(input, filter_up, filter_down, bias, up, down,
                                                                     padding, gain, slope, clamp, nullptr);
  return std::get<0>(Kernel(input, filter_up, filter_down, bias, p, false));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> forward_entry(const at::Tensor& input, const at::Tensor& filter_up,
                                                 const at::Tensor& filter_down, const std::optional<at::Tensor>& bias,
                                                 int64_t up, int64_t down, c10::SymIntArrayRef padding, double gain,
                                                 double slope, std::optional<double> clamp) {
  const FilteredLreluParams p = detail::check_filtered_lrelu_forward(input, filter_up, filter_down, bias, up, down,
                                                                     padding, gain, slope, clamp, nullptr);
  return Kernel(input, filter_up, filter_down, bias, p, true);
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad, const at::Tensor& mask, const at::Tensor& filter_up,
                          const at::Tensor& filter_down, int64_t up, int64_t down, c10::SymIntArrayRef padding,
                          double gain, double slope, c10::SymIntArrayRef input_size, bool transpose) {
  const FilteredLreluParams p = detail::check_filtered_lrelu_backward(
      grad, mask, filter_up, filter_down, up, down, padding, gain, slope, input_size, transpose, nullptr);
  return Kernel(grad, mask, filter_up, filter_down, p, transpose);
}

} // namespace

at::Tensor filtered_lrelu(const at::Tensor& input, const at::Tensor& filter_up, const at::Tensor& filter_down,
                          const std::optional<at::Tensor>& bias, int64_t up, int64_t down, c10::IntArrayRef padding,
                          double gain, double slope, std::optional<double> clamp) {
  static const auto op = detail::op_handle<FilteredLreluFn>("mmops::filtered_lrelu");
  return op.call(input, filter_up, filter_down, bias, up, down, c10::fromIntArrayRefSlow(padding), gain, slope, clamp);
}

} // namespace mmops

#define MMOPS_FILTERED_LRELU_ENTRIES(m, device)                                                \
  m.impl("filtered_lrelu", &public_entry<kernels::filtered_lrelu_forward_##device>);           \
  m.impl("_filtered_lrelu_forward", &forward_entry<kernels::filtered_lrelu_forward_##device>); \
  m.impl("_filtered_lrelu_backward", &backward_entry<kernels::filtered_lrelu_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_FILTERED_LRELU_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "filtered_lrelu")
