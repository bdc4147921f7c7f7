// mmops::contour_expand: schema, device entries (CPU/CUDA registration) and the
// public C++ API. Validation in contour_expand_checks.cpp, kernels in
// kernels/contour_expand, meta in contour_expand_meta.cpp, autograd (none) in
// contour_expand_autograd.cpp. No floating argument: no autocast kernel.

#include "contour_expand/contour_expand_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"
#include "common/index_policy.h"

#include <mmops/contour_expand.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  mmops::detail::define_op(m,
                           "contour_expand(Tensor kernel_mask, Tensor internal_kernel_label, int min_kernel_area, "
                           "int kernel_num, bool progressive=False) -> Tensor");
}

namespace mmops {
namespace {

// Validation (as the meta kernel), the labels' values when the index policy
// says so (CPU always), then the kernel.
template <auto Kernel>
at::Tensor contour_expand_entry(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                                int64_t min_kernel_area, int64_t kernel_num, bool progressive) {
  const ContourExpandParams p =
      detail::check_contour_expand(kernel_mask, internal_kernel_label, min_kernel_area, kernel_num, progressive);
  if (detail::should_validate_indices(internal_kernel_label)) {
    detail::check_contour_expand_labels(internal_kernel_label, kernel_num);
  }
  return Kernel(kernel_mask, internal_kernel_label, p);
}

} // namespace

at::Tensor contour_expand(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                          int64_t min_kernel_area, int64_t kernel_num, bool progressive) {
  static const auto op = detail::op_handle<ContourExpandFn>("mmops::contour_expand");
  return op.call(kernel_mask, internal_kernel_label, min_kernel_area, kernel_num, progressive);
}

} // namespace mmops

#define MMOPS_CONTOUR_EXPAND_ENTRIES(m, device) \
  m.impl("contour_expand", &contour_expand_entry<kernels::contour_expand_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_CONTOUR_EXPAND_ENTRIES)
// No floating arguments: autocast passes the call through unchanged.
MMOPS_REGISTER_AUTOCAST(kDataDtype, "contour_expand")
