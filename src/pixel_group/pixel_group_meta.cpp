// Meta kernel of pixel_group: labels [H, W] int32, scores [R] in score's dtype,
// counts [R] int64.

#include "pixel_group/pixel_group_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> pixel_group_meta(
    const at::Tensor& score, const at::Tensor& mask, const at::Tensor& embedding, const at::Tensor& kernel_label,
    const at::Tensor& kernel_contour, c10::SymInt kernel_region_num, double distance_threshold) {
  detail::check_pixel_group(score, mask, embedding, kernel_label, kernel_contour, kernel_region_num,
                            distance_threshold);
  return {at::empty_symint(score.sym_sizes(), kernel_label.options().dtype(at::kInt)),
          at::empty_symint({kernel_region_num}, score.options()),
          at::empty_symint({kernel_region_num}, score.options().dtype(at::kLong))};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("pixel_group", &mmops::pixel_group_meta);
}
