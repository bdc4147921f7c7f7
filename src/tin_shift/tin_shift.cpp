// mmops::tin_shift: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation is in tin_shift_checks.cpp, kernels in
// kernels/tin_shift, the meta functions in tin_shift_meta.cpp and autograd in
// tin_shift_autograd.cpp.

#include "tin_shift/tin_shift_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/tin_shift.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "tin_shift(Tensor input, Tensor shift) -> Tensor");
  // The gradient of input: grad_output moved by -shift. Autograd uses it.
  define_op(m, "_tin_shift_backward(Tensor grad_output, Tensor shift) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel (CPU
// or CUDA). No index policy: every shift value is defined.

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& input, const at::Tensor& shift) {
  return Kernel(input, shift, detail::check_tin_shift_forward(input, shift));
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& shift) {
  return Kernel(grad_output, shift, detail::check_tin_shift_backward(grad_output, shift));
}

} // namespace

at::Tensor tin_shift(const at::Tensor& input, const at::Tensor& shift) {
  static const auto op = detail::op_handle<TinShiftFn>("mmops::tin_shift");
  return op.call(input, shift);
}

} // namespace mmops

#define MMOPS_TIN_SHIFT_ENTRIES(m, device)                                  \
  m.impl("tin_shift", &forward_entry<kernels::tin_shift_forward_##device>); \
  m.impl("_tin_shift_backward", &backward_entry<kernels::tin_shift_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_TIN_SHIFT_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "tin_shift")
