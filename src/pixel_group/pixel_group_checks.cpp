// Argument validation of pixel_group, on every backend (the device entries and
// the meta kernel run it; sizes may be symbolic).

#include "common/check_utils.h"
#include "common/index_policy.h"
#include "pixel_group/pixel_group_ops.h"

#include <c10/core/ScalarType.h>
#include <c10/core/SymBool.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kPixelGroupOp;

// t: [H, W] (score's H, W), on score's device.
void check_map(const char* name, const at::Tensor& t, const at::Tensor& score) {
  TORCH_CHECK(t.dim() == 2, kOp, "expected ", name, " to be a 2-D tensor [H, W], but got shape ", shape_of(t));
  TORCH_SYM_CHECK(t.sym_size(0).sym_eq(score.sym_size(0)).sym_and(t.sym_size(1).sym_eq(score.sym_size(1))), kOp,
                  "expected ", name, " of shape [", score.sym_size(0), ", ", score.sym_size(1),
                  "] (score's H, W), but got shape ", shape_of(t));
  TORCH_CHECK(t.device() == score.device(), kOp, "expected ", name, " on the device of score (", score.device(),
              "), but got ", t.device());
}

void check_byte_map(const char* name, const at::Tensor& t, const at::Tensor& score) {
  check_map(name, t, score);
  TORCH_CHECK(t.scalar_type() == at::kBool || t.scalar_type() == at::kByte, kOp, "expected ", name,
              " to have dtype bool or uint8, but got ", t.scalar_type());
}

} // namespace

PixelGroupParams check_pixel_group(const at::Tensor& score, const at::Tensor& mask, const at::Tensor& embedding,
                                   const at::Tensor& kernel_label, const at::Tensor& kernel_contour,
                                   const c10::SymInt& kernel_region_num, double distance_threshold) {
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(score.dim() == 2, kOp, "expected score to be a 2-D tensor [H, W], but got shape ", shape_of(score));
  TORCH_CHECK(at::isFloatingType(score.scalar_type()), kOp, "expected score to have a floating point dtype, but got ",
              score.scalar_type());
  const c10::SymInt& height = score.sym_size(0);
  const c10::SymInt& width = score.sym_size(1);
  TORCH_SYM_CHECK((height * width).sym_le(kMaxInt), kOp,
                  "expected at most 2^31 - 1 pixels (H * W), but got H = ", height, ", W = ", width);
  check_byte_map("mask", mask, score);
  TORCH_CHECK(embedding.dim() == 3, kOp, "expected embedding to be a 3-D tensor [H, W, C], but got shape ",
              shape_of(embedding));
  TORCH_SYM_CHECK(embedding.sym_size(0).sym_eq(height).sym_and(embedding.sym_size(1).sym_eq(width)), kOp,
                  "expected embedding of shape [", height, ", ", width, ", C] (score's H, W), but got shape ",
                  shape_of(embedding));
  TORCH_CHECK(embedding.scalar_type() == score.scalar_type(), kOp, "expected embedding to have score's dtype (",
              score.scalar_type(), "), but got ", embedding.scalar_type());
  TORCH_CHECK(embedding.device() == score.device(), kOp, "expected embedding on the device of score (", score.device(),
              "), but got ", embedding.device());
  check_map("kernel_label", kernel_label, score);
  TORCH_CHECK(kernel_label.scalar_type() == at::kInt, kOp, "expected kernel_label to have dtype int32, but got ",
              kernel_label.scalar_type());
  check_byte_map("kernel_contour", kernel_contour, score);
  TORCH_SYM_CHECK(kernel_region_num.sym_ge(0).sym_and(kernel_region_num.sym_le(kMaxInt)), kOp,
                  "expected kernel_region_num in [0, 2^31 - 1], but got ", kernel_region_num);
  const int64_t regions = int_or_unknown(kernel_region_num);
  const int64_t channels = int_or_unknown(embedding.sym_size(2));
  if (regions >= 0 && channels >= 0) {
    checked_mul(kOp, "kernel_region_num * C (the kernel embeddings)", regions, channels);
  }
  TORCH_CHECK(!std::isnan(distance_threshold), kOp, "distance_threshold must be a number, but got nan");
  return {regions, distance_threshold};
}

void check_pixel_group_labels(const at::Tensor& kernel_label, int64_t kernel_region_num) {
  if (kernel_label.numel() == 0) {
    return;
  }
  const auto [min, max] = index_value_range(kernel_label);
  TORCH_CHECK(min >= 0 && (max == 0 || max < kernel_region_num), kOp,
              "expected every value of kernel_label in [0, kernel_region_num) = [0, ", kernel_region_num,
              ") (0, the background, always), but got values in [", min, ", ", max, "]");
}

} // namespace detail
} // namespace mmops
