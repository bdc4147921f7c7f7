// Argument validation of carafe, on every backend (the meta kernels run it
// too, so fake tensors raise the same errors).

#include "carafe/carafe_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

namespace mmops {
namespace detail {
namespace {

void check_options(int64_t kernel_size, int64_t group_size, int64_t scale_factor) {
  TORCH_CHECK(kernel_size >= 1 && kernel_size <= kCarafeMaxKernel && kernel_size % 2 == 1, kCarafeOp,
              "kernel_size must be odd and in [1, ", kCarafeMaxKernel, "], but got ", kernel_size);
  TORCH_CHECK(group_size >= 1, kCarafeOp, "group_size must be positive, but got ", group_size);
  TORCH_CHECK(scale_factor >= 1 && scale_factor <= kCarafeMaxScale, kCarafeOp, "scale_factor must be in [1, ",
              kCarafeMaxScale, "], but got ", scale_factor);
}

void check_tensor(const char* name, const at::Tensor& t, const at::Tensor& features) {
  TORCH_CHECK(t.dim() == 4, kCarafeOp, "expected ", name, " to be a 4-D tensor, but got a ", t.dim(),
              "-D tensor of shape ", shape_of(t));
  TORCH_CHECK(t.scalar_type() == features.scalar_type(), kCarafeOp, "expected ", name,
              " to have the dtype of features (", features.scalar_type(), "), but got ", t.scalar_type());
  TORCH_CHECK(t.device() == features.device(), kCarafeOp, "expected ", name, " on the device of features (",
              features.device(), "), but got ", t.device());
}

} // namespace

CarafeParams check_carafe_forward(const at::Tensor& features, const at::Tensor& masks, int64_t kernel_size,
                                  int64_t group_size, int64_t scale_factor) {
  TORCH_CHECK(features.dim() == 4, kCarafeOp, "expected features to be a 4-D tensor [N, C, H, W], but got a ",
              features.dim(), "-D tensor of shape ", shape_of(features));
  TORCH_CHECK(at::isFloatingType(features.scalar_type()), kCarafeOp,
              "expected features to have a floating point dtype, but got ", features.scalar_type());
  check_tensor("masks", masks, features);
  check_options(kernel_size, group_size, scale_factor);
  TORCH_SYM_CHECK((features.sym_size(1) % group_size).sym_eq(0), kCarafeOp, "expected the channels of features (",
                  features.sym_size(1), ") to be divisible by group_size (", group_size, ")");
  const int64_t mask_channels =
      checked_mul(kCarafeOp, "the mask channels kernel_size^2 * group_size", kernel_size * kernel_size, group_size);
  const c10::SymInt out_h = features.sym_size(2) * scale_factor, out_w = features.sym_size(3) * scale_factor;
  const c10::SymBool shape_ok = masks.sym_size(0)
                                    .sym_eq(features.sym_size(0))
                                    .sym_and(masks.sym_size(1).sym_eq(mask_channels))
                                    .sym_and(masks.sym_size(2).sym_eq(out_h))
                                    .sym_and(masks.sym_size(3).sym_eq(out_w));
  TORCH_SYM_CHECK(shape_ok, kCarafeOp, "expected masks of shape [", features.sym_size(0), ", ", mask_channels, ", ",
                  out_h, ", ", out_w,
                  "] ([N, kernel_size^2 * group_size, H * scale_factor, W * scale_factor] of features of shape ",
                  shape_of(features), "), but got ", shape_of(masks));
  return CarafeParams{kernel_size, group_size, scale_factor};
}

CarafeParams check_carafe_backward(const at::Tensor& grad_output, const at::Tensor& features, const at::Tensor& masks,
                                   int64_t kernel_size, int64_t group_size, int64_t scale_factor) {
  const CarafeParams p = check_carafe_forward(features, masks, kernel_size, group_size, scale_factor);
  check_tensor("grad_output", grad_output, features);
  const c10::SymBool shape_ok = grad_output.sym_size(0)
                                    .sym_eq(features.sym_size(0))
                                    .sym_and(grad_output.sym_size(1).sym_eq(features.sym_size(1)))
                                    .sym_and(grad_output.sym_size(2).sym_eq(masks.sym_size(2)))
                                    .sym_and(grad_output.sym_size(3).sym_eq(masks.sym_size(3)));
  TORCH_SYM_CHECK(shape_ok, kCarafeOp, "expected grad_output of shape [", features.sym_size(0), ", ",
                  features.sym_size(1), ", ", masks.sym_size(2), ", ", masks.sym_size(3), "] (the output's), but got ",
                  shape_of(grad_output));
  return p;
}

} // namespace detail
} // namespace mmops
