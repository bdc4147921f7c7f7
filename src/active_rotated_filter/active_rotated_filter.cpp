// mmops::active_rotated_filter: schemas, device entries (CPU/CUDA registration)
// and the public C++ API. Validation is in active_rotated_filter_checks.cpp,
// kernels in kernels/active_rotated_filter, the meta functions in
// active_rotated_filter_meta.cpp and autograd in active_rotated_filter_autograd.cpp.

#include "active_rotated_filter/active_rotated_filter_ops.h"

#include "common/autocast.h"
#include "common/check_utils.h"
#include "common/dispatch.h"
#include "common/index_policy.h"

#include <mmops/active_rotated_filter.h>

#include <torch/library.h>

#include <vector>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "active_rotated_filter(Tensor input, Tensor indices) -> Tensor");
  define_op(m, "_active_rotated_filter_backward(Tensor grad_output, Tensor indices, SymInt[5] input_size) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the indices' values
// when the index policy says so (CPU always), then the kernel.
void apply_index_policy(const at::Tensor& indices, const ActiveRotatedFilterParams& p) {
  if (detail::should_validate_indices(indices)) {
    detail::check_active_rotated_filter_indices(indices, p.entries);
  }
}

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& input, const at::Tensor& indices) {
  const ActiveRotatedFilterParams p = detail::check_active_rotated_filter_forward(input, indices);
  apply_index_policy(indices, p);
  return Kernel(input, indices, p);
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymIntArrayRef input_size) {
  const ActiveRotatedFilterParams p = detail::check_active_rotated_filter_backward(grad_output, indices, input_size);
  apply_index_policy(indices, p);
  return Kernel(grad_output, indices, p);
}

} // namespace

at::Tensor active_rotated_filter(const at::Tensor& input, const at::Tensor& indices) {
  static const auto op = detail::op_handle<ActiveRotatedFilterFn>("mmops::active_rotated_filter");
  return op.call(input, indices);
}

} // namespace mmops

#define MMOPS_ACTIVE_ROTATED_FILTER_ENTRIES(m, device)                                              \
  m.impl("active_rotated_filter", &forward_entry<kernels::active_rotated_filter_forward_##device>); \
  m.impl("_active_rotated_filter_backward", &backward_entry<kernels::active_rotated_filter_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_ACTIVE_ROTATED_FILTER_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "active_rotated_filter")
