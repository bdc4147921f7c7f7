// mmops::pixel_group: schema, device entries (CPU/CUDA registration) and the
// public C++ API. Validation in pixel_group_checks.cpp, kernels in
// kernels/pixel_group, meta in pixel_group_meta.cpp, autograd (none) in
// pixel_group_autograd.cpp.

#include "pixel_group/pixel_group_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"
#include "common/index_policy.h"

#include <mmops/pixel_group.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  // (labels [H, W] int32, mean score [R] (score's dtype), pixel count [R] int64)
  mmops::detail::define_op(m,
                           "pixel_group(Tensor score, Tensor mask, Tensor embedding, Tensor kernel_label, "
                           "Tensor kernel_contour, SymInt kernel_region_num, float distance_threshold) "
                           "-> (Tensor labels, Tensor scores, Tensor counts)");
}

namespace mmops {
namespace {

// Validation (as the meta kernel), the labels' values when the index policy
// says so (CPU always), then the kernel.
template <auto Kernel>
std::tuple<at::Tensor, at::Tensor, at::Tensor> pixel_group_entry(
    const at::Tensor& score, const at::Tensor& mask, const at::Tensor& embedding, const at::Tensor& kernel_label,
    const at::Tensor& kernel_contour, c10::SymInt kernel_region_num, double distance_threshold) {
  PixelGroupParams p = detail::check_pixel_group(score, mask, embedding, kernel_label, kernel_contour,
                                                 kernel_region_num, distance_threshold);
  p.kernel_region_num = kernel_region_num.guard_int(__FILE__, __LINE__);
  if (detail::should_validate_indices(kernel_label)) {
    detail::check_pixel_group_labels(kernel_label, p.kernel_region_num);
  }
  return Kernel(score, mask, embedding, kernel_label, kernel_contour, p);
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> pixel_group(const at::Tensor& score, const at::Tensor& mask,
                                                           const at::Tensor& embedding, const at::Tensor& kernel_label,
                                                           const at::Tensor& kernel_contour, int64_t kernel_region_num,
                                                           double distance_threshold) {
  static const auto op = detail::op_handle<PixelGroupFn>("mmops::pixel_group");
  return op.call(score, mask, embedding, kernel_label, kernel_contour, c10::SymInt(kernel_region_num),
                 distance_threshold);
}

} // namespace mmops

#define MMOPS_PIXEL_GROUP_ENTRIES(m, device) m.impl("pixel_group", &pixel_group_entry<kernels::pixel_group_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_PIXEL_GROUP_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "pixel_group")
