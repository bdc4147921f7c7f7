// Argument validation of upfirdn2d, on every backend (the meta kernel runs it
// too, so fake tensors raise the same errors). Bounds come before arithmetic:
// H, W <= 2^31 - 1, up and down in [1, 2^16], |pad| <= 2^40, so the padded
// upsampled sides (H * up + pad0 + pad1) are computed in int64 without overflow,
// then checked to lie in [kernel side, 2^31 - 1].

#include "upfirdn2d/upfirdn2d_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

#include <cstdint>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kUpfirdn2dOp;
using upfirdn2d_math::kMaxFactor;
using upfirdn2d_math::kMaxPad;
using upfirdn2d_math::kMaxSide;

void check_factors(const char* name, c10::IntArrayRef f) {
  TORCH_CHECK(f.size() == 2, kOp, "expected ", name, " to hold 2 values [", name, "_x, ", name, "_y], but got ",
              f.size(), " values ", f);
  TORCH_CHECK(f[0] >= 1 && f[0] <= kMaxFactor && f[1] >= 1 && f[1] <= kMaxFactor, kOp, "expected ", name,
              " factors in [1, 2^16], but got ", name, " = ", f);
}

// The padded upsampled side along an axis (in * up + pad0 + pad1).
c10::SymInt padded_side(const c10::SymInt& in, int64_t up, const c10::SymInt& pad0, const c10::SymInt& pad1) {
  return in * up + pad0 + pad1;
}

} // namespace

Upfirdn2dParams check_upfirdn2d(const at::Tensor& input, const at::Tensor& kernel, c10::IntArrayRef up,
                                c10::IntArrayRef down, c10::SymIntArrayRef pad) {
  TORCH_CHECK(input.dim() == 4, kOp, "expected input to be a 4-D tensor [N, C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  TORCH_CHECK(kernel.dim() == 2, kOp, "expected kernel to be a 2-D tensor [kernel_h, kernel_w], but got a ",
              kernel.dim(), "-D tensor of shape ", shape_of(kernel));
  TORCH_CHECK(at::isFloatingType(kernel.scalar_type()), kOp, "expected kernel to have a floating point dtype, but got ",
              kernel.scalar_type());
  TORCH_CHECK(kernel.device() == input.device(), kOp, "expected kernel on the device of input (", input.device(),
              "), but got ", kernel.device());
  TORCH_SYM_CHECK(kernel.sym_size(0).sym_ge(1) & kernel.sym_size(1).sym_ge(1), kOp,
                  "expected a non-empty kernel, but got kernel of shape ", shape_of(kernel));
  check_factors("up", up);
  check_factors("down", down);
  TORCH_CHECK(pad.size() == 4, kOp, "expected pad to hold 4 values [pad_x0, pad_x1, pad_y0, pad_y1], but got ",
              pad.size(), " values ", pad);
  for (const c10::SymInt& v : pad) {
    TORCH_SYM_CHECK(v.sym_ge(-kMaxPad) & v.sym_le(kMaxPad), kOp,
                    "expected pad values in [-2^40, 2^40], but got pad = ", pad);
  }
  const c10::SymInt& in_h = input.sym_size(2);
  const c10::SymInt& in_w = input.sym_size(3);
  TORCH_SYM_CHECK(in_h.sym_le(kMaxSide) & in_w.sym_le(kMaxSide), kOp,
                  "expected input's H and W to be at most 2^31 - 1, but got input of shape ", shape_of(input));
  TORCH_SYM_CHECK(kernel.sym_size(0).sym_le(kMaxSide) & kernel.sym_size(1).sym_le(kMaxSide), kOp,
                  "expected kernel sides of at most 2^31 - 1, but got kernel of shape ", shape_of(kernel));
  const c10::SymInt up_h = padded_side(in_h, up[1], pad[2], pad[3]);
  const c10::SymInt up_w = padded_side(in_w, up[0], pad[0], pad[1]);
  TORCH_SYM_CHECK(up_h.sym_ge(kernel.sym_size(0)) & up_w.sym_ge(kernel.sym_size(1)), kOp,
                  "expected an output of at least 1 x 1: the upsampled, padded input (H * up_y + pad_y0 + pad_y1 = ",
                  up_h, ", W * up_x + pad_x0 + pad_x1 = ", up_w, ") must be at least the kernel (", shape_of(kernel),
                  "); input of shape ", shape_of(input), ", up = ", up, ", pad = ", pad);
  TORCH_SYM_CHECK(up_h.sym_le(kMaxSide) & up_w.sym_le(kMaxSide), kOp,
                  "expected the upsampled, padded input to be at most 2^31 - 1 on each side, but got ", up_h, " x ",
                  up_w, " (input of shape ", shape_of(input), ", up = ", up, ", pad = ", pad, ")");

  Upfirdn2dParams p{};
  const int64_t n = int_or_unknown(input.sym_size(0));
  const int64_t c = int_or_unknown(input.sym_size(1));
  p.planes = n >= 0 && c >= 0 ? checked_mul(kOp, "N * C", n, c) : -1;
  p.in_h = int_or_unknown(in_h);
  p.in_w = int_or_unknown(in_w);
  p.kernel_h = int_or_unknown(kernel.sym_size(0));
  p.kernel_w = int_or_unknown(kernel.sym_size(1));
  p.up_x = up[0];
  p.up_y = up[1];
  p.down_x = down[0];
  p.down_y = down[1];
  p.pad_x0 = int_or_unknown(pad[0]);
  p.pad_x1 = int_or_unknown(pad[1]);
  p.pad_y0 = int_or_unknown(pad[2]);
  p.pad_y1 = int_or_unknown(pad[3]);
  const int64_t h = int_or_unknown(up_h), w = int_or_unknown(up_w);
  p.out_h = h >= 0 && p.kernel_h >= 0 ? (h - p.kernel_h) / p.down_y + 1 : -1;
  p.out_w = w >= 0 && p.kernel_w >= 0 ? (w - p.kernel_w) / p.down_x + 1 : -1;
  if (p.planes >= 0 && p.out_h >= 0 && p.out_w >= 0) {
    checked_product(kOp, "the output's element count N * C * out_h * out_w", {p.planes, p.out_h, p.out_w});
  }
  return p;
}

std::vector<c10::SymInt> upfirdn2d_output_shape(const at::Tensor& input, const at::Tensor& kernel, c10::IntArrayRef up,
                                                c10::IntArrayRef down, c10::SymIntArrayRef pad) {
  const c10::SymInt up_h = padded_side(input.sym_size(2), up[1], pad[2], pad[3]);
  const c10::SymInt up_w = padded_side(input.sym_size(3), up[0], pad[0], pad[1]);
  // both differences are >= 0 (checked): floor division
  return {input.sym_size(0), input.sym_size(1), (up_h - kernel.sym_size(0)) / down[1] + 1,
          (up_w - kernel.sym_size(1)) / down[0] + 1};
}

} // namespace detail
} // namespace mmops
