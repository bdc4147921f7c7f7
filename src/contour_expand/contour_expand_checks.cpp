// Argument validation of contour_expand, on every backend (the device entries
// and the meta kernel run it; sizes may be symbolic).

#include "common/check_utils.h"
#include "common/index_policy.h"
#include "contour_expand/contour_expand_ops.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {

ContourExpandParams check_contour_expand(const at::Tensor& kernel_mask, const at::Tensor& internal_kernel_label,
                                         int64_t min_kernel_area, int64_t kernel_num, bool progressive) {
  constexpr const char* op = kContourExpandOp;
  constexpr int64_t kMaxLabel = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(kernel_mask.dim() == 3, op, "expected kernel_mask to be a 3-D tensor [K, H, W], but got shape ",
              shape_of(kernel_mask));
  TORCH_CHECK(kernel_mask.scalar_type() == at::kByte || kernel_mask.scalar_type() == at::kBool, op,
              "expected kernel_mask to have dtype uint8 or bool, but got ", kernel_mask.scalar_type());
  TORCH_CHECK(internal_kernel_label.dim() == 2, op,
              "expected internal_kernel_label to be a 2-D tensor [H, W], but got shape ",
              shape_of(internal_kernel_label));
  const c10::SymInt& height = kernel_mask.sym_size(1);
  const c10::SymInt& width = kernel_mask.sym_size(2);
  TORCH_SYM_CHECK(
      internal_kernel_label.sym_size(0).sym_eq(height).sym_and(internal_kernel_label.sym_size(1).sym_eq(width)), op,
      "expected internal_kernel_label of shape [", height, ", ", width, "] (kernel_mask's H, W), but got shape ",
      shape_of(internal_kernel_label));
  TORCH_CHECK(internal_kernel_label.scalar_type() == at::kInt, op,
              "expected internal_kernel_label to have dtype int32, but got ", internal_kernel_label.scalar_type());
  TORCH_CHECK(internal_kernel_label.device() == kernel_mask.device(), op,
              "expected internal_kernel_label on the device of kernel_mask (", kernel_mask.device(), "), but got ",
              internal_kernel_label.device());
  TORCH_SYM_CHECK((height * width).sym_le(kMaxLabel), op,
                  "expected at most 2^31 - 1 pixels (H * W), but got H = ", height, ", W = ", width);
  TORCH_CHECK(kernel_num >= 0 && kernel_num < kMaxLabel, op, "expected kernel_num in [0, 2^31 - 2], but got ",
              kernel_num);
  return {min_kernel_area, kernel_num, progressive};
}

void check_contour_expand_labels(const at::Tensor& internal_kernel_label, int64_t kernel_num) {
  if (internal_kernel_label.numel() == 0) {
    return;
  }
  const auto [min, max] = index_value_range(internal_kernel_label);
  TORCH_CHECK(min >= 0 && max <= kernel_num, kContourExpandOp,
              "expected every value of internal_kernel_label in [0, kernel_num] = [0, ", kernel_num,
              "], but got values in [", min, ", ", max, "]");
}

} // namespace detail
} // namespace mmops
