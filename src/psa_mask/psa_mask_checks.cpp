// Argument validation of psa_mask, on every backend (the meta kernels run it
// too, so fake tensors raise the same errors).

#include "psa_mask/psa_mask_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

#include <cstdint>
#include <vector>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kPsaMaskOp;

void check_mask_size(at::IntArrayRef mask_size) {
  TORCH_CHECK(mask_size.size() == 2, kOp, "expected mask_size to hold 2 values (mask_h, mask_w), but got ",
              mask_size.size());
  TORCH_CHECK(mask_size[0] >= 1 && mask_size[1] >= 1, kOp, "expected mask_size to be positive, but got ", mask_size);
  checked_product(kOp, "mask_size's mask_h * mask_w", {mask_size[0], mask_size[1]});
}

// N, H, W of a 4-D tensor [N, ?, H, W]; the output's element count
// N * (H * W)^2 must fit in int64 (checked once the sizes are known).
PsaMaskParams params_of(const at::Tensor& t, c10::string_view psa_type, at::IntArrayRef mask_size) {
  PsaMaskParams p{};
  p.type = parse_choice(kOp, "psa_type", psa_type, kPsaTypes);
  p.batch = int_or_unknown(t.sym_size(0));
  p.height = int_or_unknown(t.sym_size(2));
  p.width = int_or_unknown(t.sym_size(3));
  p.mask_h = mask_size[0];
  p.mask_w = mask_size[1];
  if (p.batch >= 0 && p.height >= 0 && p.width >= 0) {
    const int64_t plane = checked_product(kOp, "H * W", {p.height, p.width});
    checked_product(kOp, "the output's element count N * (H * W)^2", {p.batch, plane, plane});
  }
  return p;
}

} // namespace

PsaMaskParams check_psa_mask_forward(const at::Tensor& input, c10::string_view psa_type, at::IntArrayRef mask_size) {
  TORCH_CHECK(input.dim() == 4, kOp, "expected input to be a 4-D tensor [N, mask_h * mask_w, H, W], but got a ",
              input.dim(), "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  check_mask_size(mask_size);
  TORCH_SYM_CHECK(input.sym_size(1).sym_eq(mask_size[0] * mask_size[1]), kOp,
                  "expected input to have mask_h * mask_w = ", mask_size[0] * mask_size[1], " channels (mask_size ",
                  mask_size, "), but got input of shape ", shape_of(input));
  return params_of(input, psa_type, mask_size);
}

PsaMaskParams check_psa_mask_backward(const at::Tensor& grad_output, c10::string_view psa_type,
                                      at::IntArrayRef mask_size) {
  TORCH_CHECK(grad_output.dim() == 4, kOp, "expected grad_output to be a 4-D tensor [N, H * W, H, W], but got a ",
              grad_output.dim(), "-D tensor of shape ", shape_of(grad_output));
  TORCH_CHECK(at::isFloatingType(grad_output.scalar_type()), kOp,
              "expected grad_output to have a floating point dtype, but got ", grad_output.scalar_type());
  check_mask_size(mask_size);
  TORCH_SYM_CHECK(grad_output.sym_size(1).sym_eq(grad_output.sym_size(2) * grad_output.sym_size(3)), kOp,
                  "expected grad_output of shape [N, H * W, H, W], but got ", shape_of(grad_output));
  return params_of(grad_output, psa_type, mask_size);
}

} // namespace detail
} // namespace mmops
