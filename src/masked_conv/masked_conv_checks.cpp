// Argument validation of masked_conv2d, on every backend (the meta kernels run
// it too, so fake tensors raise the same errors).

#include "masked_conv/masked_conv_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymBool.h>

#include <cstdint>
#include <limits>
#include <optional>

namespace mmops {
namespace detail {
namespace {

constexpr const char* op = kMaskedConvOp;
constexpr int64_t kMaxParam = std::numeric_limits<int32_t>::max();

// padding / stride: two values in [lowest, 2^31) (so H + 2 * pad stays in int64).
void check_pair(const char* name, at::IntArrayRef values, int64_t lowest) {
  TORCH_CHECK(values.size() == 2, op, "expected ", name, " to hold 2 values, but got ", values.size(), " (", values,
              ")");
  for (const int64_t v : values) {
    TORCH_CHECK(v >= lowest && v <= kMaxParam, op, name, " values must be ", lowest == 0 ? "non-negative" : "positive",
                " and at most ", kMaxParam, ", but got ", values);
  }
}

void check_input_and_weight(const at::Tensor& input, const at::Tensor& weight) {
  TORCH_CHECK(input.dim() == 4, op, "expected input to be a 4-D tensor [N, C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  TORCH_CHECK(weight.dim() == 4, op, "expected weight to be a 4-D tensor [O, C, kh, kw], but got a ", weight.dim(),
              "-D tensor of shape ", shape_of(weight));
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(), op, "expected weight to have the dtype of input (",
              input.scalar_type(), "), but got ", weight.scalar_type());
  TORCH_CHECK(weight.device() == input.device(), op, "expected weight on the device of input (", input.device(),
              "), but got ", weight.device());
  TORCH_SYM_CHECK(weight.sym_size(1).sym_eq(input.sym_size(1)), op,
                  "expected weight of shape [O, C = ", input.sym_size(1), ", kh, kw] (C: the input channels), but got ",
                  shape_of(weight));
  TORCH_SYM_CHECK(weight.sym_size(2).sym_gt(0).sym_and(weight.sym_size(3).sym_gt(0)), op,
                  "expected a positive kernel size (weight.size(2), weight.size(3)), but got weight of shape ",
                  shape_of(weight));
}

void check_bias(const std::optional<at::Tensor>& bias, const at::Tensor& input, const at::Tensor& weight) {
  if (!bias.has_value() || !bias->defined()) {
    return;
  }
  TORCH_CHECK(bias->scalar_type() == input.scalar_type(), op, "expected bias to have the dtype of input (",
              input.scalar_type(), "), but got ", bias->scalar_type());
  TORCH_CHECK(bias->device() == input.device(), op, "expected bias on the device of input (", input.device(),
              "), but got ", bias->device());
  TORCH_CHECK(bias->dim() == 1, op, "expected bias to be a 1-D tensor [O], but got shape ", shape_of(*bias));
  TORCH_SYM_CHECK(bias->sym_size(0).sym_eq(weight.sym_size(0)), op, "expected bias of shape [", weight.sym_size(0),
                  "] ([O]), but got ", shape_of(*bias));
}

// The mask indexes the output grid: [N, H_out, W_out], or (mmcv's rule, stride 1
// only) the input's [N, H, W].
void check_mask(const at::Tensor& mask, const at::Tensor& input, const c10::SymInt& out_h, const c10::SymInt& out_w,
                at::IntArrayRef stride) {
  TORCH_CHECK(mask.device() == input.device(), op, "expected mask on the device of input (", input.device(),
              "), but got ", mask.device());
  TORCH_CHECK(!at::isComplexType(mask.scalar_type()), op,
              "expected mask to have a real (floating point, integer or bool) dtype, but got ", mask.scalar_type());
  const bool unit_stride = stride[0] == 1 && stride[1] == 1;
  TORCH_CHECK(mask.dim() == 3, op, "expected mask to be a 3-D tensor [N, H_out, W_out], but got a ", mask.dim(),
              "-D tensor of shape ", shape_of(mask));
  const c10::SymBool batch = mask.sym_size(0).sym_eq(input.sym_size(0));
  const c10::SymBool as_output = mask.sym_size(1).sym_eq(out_h).sym_and(mask.sym_size(2).sym_eq(out_w));
  const c10::SymBool as_input = c10::SymBool(unit_stride)
                                    .sym_and(mask.sym_size(1).sym_eq(input.sym_size(2)))
                                    .sym_and(mask.sym_size(2).sym_eq(input.sym_size(3)));
  TORCH_SYM_CHECK(batch.sym_and(as_output.sym_or(as_input)), op, "expected mask of shape [N, H_out, W_out] = [",
                  input.sym_size(0), ", ", out_h, ", ", out_w, "]",
                  unit_stride ? " or the input's [N, H, W]" : " (stride > 1: the output's size)", ", but got ",
                  shape_of(mask));
}

// Output, column buffer and index sizes fit in int64 (when the sizes are concrete).
void check_sizes(const at::Tensor& input, const at::Tensor& weight, const c10::SymInt& out_h,
                 const c10::SymInt& out_w) {
  const auto n = input.sym_size(0).maybe_as_int(), c = input.sym_size(1).maybe_as_int();
  const auto o = weight.sym_size(0).maybe_as_int(), kh = weight.sym_size(2).maybe_as_int();
  const auto kw = weight.sym_size(3).maybe_as_int(), h = out_h.maybe_as_int(), w = out_w.maybe_as_int();
  if (!(n && c && o && kh && kw && h && w)) {
    return;
  }
  const int64_t positions = checked_product(op, "the output positions N * H_out * W_out", {*n, *h, *w});
  checked_mul(op, "the output size N * O * H_out * W_out", positions, *o);
  const int64_t rows = checked_product(op, "the column rows C * kh * kw", {*c, *kh, *kw});
  checked_mul(op, "the column buffer (C * kh * kw) * (N * H_out * W_out)", rows, positions);
}

MaskedConvParams params_of(const at::Tensor& weight, at::IntArrayRef padding, at::IntArrayRef stride,
                           const c10::SymInt& out_h, const c10::SymInt& out_w) {
  MaskedConvParams p{};
  p.kernel_h = weight.sym_size(2).maybe_as_int().value_or(-1);
  p.kernel_w = weight.sym_size(3).maybe_as_int().value_or(-1);
  p.pad_h = padding[0];
  p.pad_w = padding[1];
  p.stride_h = stride[0];
  p.stride_w = stride[1];
  p.out_h = out_h.maybe_as_int().value_or(-1);
  p.out_w = out_w.maybe_as_int().value_or(-1);
  return p;
}

} // namespace

MaskedConvChecked check_masked_conv2d(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                                      at::IntArrayRef stride) {
  check_input_and_weight(input, weight);
  check_bias(bias, input, weight);
  check_pair("padding", padding, 0);
  check_pair("stride", stride, 1);
  const c10::SymInt padded_h = input.sym_size(2) + 2 * padding[0], padded_w = input.sym_size(3) + 2 * padding[1];
  TORCH_SYM_CHECK(padded_h.sym_ge(weight.sym_size(2)).sym_and(padded_w.sym_ge(weight.sym_size(3))), op,
                  "expected a positive output size, but the input (H, W) = (", input.sym_size(2), ", ",
                  input.sym_size(3), ") with padding ", padding, " is smaller than the kernel (", weight.sym_size(2),
                  ", ", weight.sym_size(3), ")");
  const c10::SymInt out_h = (padded_h - weight.sym_size(2)) / stride[0] + 1;
  const c10::SymInt out_w = (padded_w - weight.sym_size(3)) / stride[1] + 1;
  check_mask(mask, input, out_h, out_w, stride);
  check_sizes(input, weight, out_h, out_w);
  return {params_of(weight, padding, stride, out_h, out_w), out_h, out_w};
}

MaskedConvChecked check_masked_conv2d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                               const at::Tensor& mask, const at::Tensor& weight,
                                               at::IntArrayRef padding, at::IntArrayRef stride) {
  MaskedConvChecked c = check_masked_conv2d(input, mask, weight, std::nullopt, padding, stride);
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(), op, "expected grad_output to have the dtype of input (",
              input.scalar_type(), "), but got ", grad_output.scalar_type());
  TORCH_CHECK(grad_output.device() == input.device(), op, "expected grad_output on the device of input (",
              input.device(), "), but got ", grad_output.device());
  TORCH_CHECK(grad_output.dim() == 4, op, "expected grad_output to be a 4-D tensor [N, O, H_out, W_out], but got a ",
              grad_output.dim(), "-D tensor of shape ", shape_of(grad_output));
  const c10::SymBool shape_ok = grad_output.sym_size(0)
                                    .sym_eq(input.sym_size(0))
                                    .sym_and(grad_output.sym_size(1).sym_eq(weight.sym_size(0)))
                                    .sym_and(grad_output.sym_size(2).sym_eq(c.out_h))
                                    .sym_and(grad_output.sym_size(3).sym_eq(c.out_w));
  TORCH_SYM_CHECK(shape_ok, op, "expected grad_output of shape [N, O, H_out, W_out] = [", input.sym_size(0), ", ",
                  weight.sym_size(0), ", ", c.out_h, ", ", c.out_w, "], but got ", shape_of(grad_output));
  return c;
}

} // namespace detail
} // namespace mmops
