// Meta kernel of contour_expand: the int32 [H, W] label map.

#include "contour_expand/contour_expand_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor contour_expand_meta(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                               int64_t min_kernel_area, int64_t kernel_num, bool progressive) {
  detail::check_contour_expand(kernel_mask, internal_kernel_label, min_kernel_area, kernel_num, progressive);
  return at::empty_symint(internal_kernel_label.sym_sizes(), internal_kernel_label.options().dtype(at::kInt));
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("contour_expand", &mmops::contour_expand_meta);
}
