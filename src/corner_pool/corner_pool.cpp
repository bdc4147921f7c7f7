// mmops::corner_pool: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation is in corner_pool_checks.cpp, kernels in
// kernels/corner_pool, the meta functions in corner_pool_meta.cpp and autograd
// in corner_pool_autograd.cpp.

#include "corner_pool/corner_pool_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/corner_pool.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "corner_pool(Tensor input, str mode) -> Tensor");
  define_op(m, "_corner_pool_backward(Tensor grad_output, Tensor input, str mode) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel.
template <auto Kernel>
at::Tensor corner_pool_entry(const at::Tensor& input, c10::string_view mode) {
  return Kernel(input, detail::check_corner_pool_forward(input, mode));
}

template <auto Kernel>
at::Tensor corner_pool_backward_entry(const at::Tensor& grad_output, const at::Tensor& input, c10::string_view mode) {
  return Kernel(grad_output, input, detail::check_corner_pool_backward(grad_output, input, mode));
}

} // namespace

at::Tensor corner_pool(const at::Tensor& input, c10::string_view mode) {
  static const auto op = detail::op_handle<CornerPoolFn>("mmops::corner_pool");
  return op.call(input, mode);
}

} // namespace mmops

#define MMOPS_CORNER_POOL_ENTRIES(m, device)                                        \
  m.impl("corner_pool", &corner_pool_entry<kernels::corner_pool_forward_##device>); \
  m.impl("_corner_pool_backward", &corner_pool_backward_entry<kernels::corner_pool_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_CORNER_POOL_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "corner_pool")
