// Argument validation of deform_conv2d / modulated_deform_conv2d and their
// backward, on every backend (the meta kernels run it too, so fake tensors
// raise the same errors). Messages name the argument, what was expected and
// what was received.

#include "common/check_utils.h"
#include "deform_conv/deform_conv_ops.h"

#include <c10/core/SymBool.h>
#include <c10/core/SymInt.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

namespace mmops {
namespace detail {
namespace {

// The prefixes of the error messages.
constexpr const char* kDeformConv2dOp = "mmops::deform_conv2d: ";
constexpr const char* kModulatedDeformConv2dOp = "mmops::modulated_deform_conv2d: ";
constexpr const char* kDeformConv2dBackwardOp = "mmops::_deform_conv2d_backward: ";

std::string text_of(c10::SymIntArrayRef values) {
  std::ostringstream s;
  s << values;
  return s.str();
}

int64_t concrete_or(const c10::SymInt& v) {
  return v.maybe_as_int().value_or(-1);
}

void check_pair(const char* op, const char* name, c10::SymIntArrayRef values, bool zero_allowed) {
  TORCH_CHECK(values.size() == 2, op, "expected ", name, " to hold 2 values (h, w), but got ", values.size(), ": ",
              text_of(values));
  for (const c10::SymInt& v : values) {
    TORCH_SYM_CHECK(zero_allowed ? v.sym_ge(0) : v.sym_gt(0), op, name, " values must be ",
                    zero_allowed ? "non-negative" : "positive", ", but got ", text_of(values));
  }
}

void check_companion(const char* op, const char* name, const at::Tensor& t, const at::Tensor& input) {
  TORCH_CHECK(t.scalar_type() == input.scalar_type(), op, "expected ", name, " to have the dtype of input (",
              input.scalar_type(), "), but got ", t.scalar_type());
  TORCH_CHECK(t.device() == input.device(), op, "expected ", name, " on the device of input (", input.device(),
              "), but got ", t.device());
}

void check_shape(const char* op, const char* name, const char* meaning, const at::Tensor& t,
                 const std::vector<c10::SymInt>& expected) {
  TORCH_CHECK(t.dim() == static_cast<int64_t>(expected.size()), op, "expected ", name, " of shape ", text_of(expected),
              " (", meaning, "), but got a ", t.dim(), "-D tensor of shape ", shape_of(t));
  c10::SymBool same(true);
  for (size_t d = 0; d < expected.size(); ++d) {
    same = same.sym_and(t.sym_size(static_cast<int64_t>(d)).sym_eq(expected[d]));
  }
  TORCH_SYM_CHECK(same, op, "expected ", name, " of shape ", text_of(expected), " (", meaning, "), but got ",
                  shape_of(t));
}

// The size arithmetic of concrete arguments (every real kernel call, and fake
// tensors with static shapes), in 64 bits with overflow checks, before the
// symbolic expressions of check_common evaluate it (int64 arithmetic on
// concrete SymInts would wrap around): the output size, the offset / mask
// channels, the output and column buffer sizes. Symbolic sizes are unbounded
// integers; their real calls come here with concrete values.
void check_size_arithmetic(const char* op, const at::Tensor& input, const at::Tensor& weight,
                           c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                           int64_t groups, int64_t deform_groups) {
  const std::optional<int64_t> sizes[] = {
      input.sym_size(0).maybe_as_int(),  input.sym_size(1).maybe_as_int(),  input.sym_size(2).maybe_as_int(),
      input.sym_size(3).maybe_as_int(),  weight.sym_size(0).maybe_as_int(), weight.sym_size(1).maybe_as_int(),
      weight.sym_size(2).maybe_as_int(), weight.sym_size(3).maybe_as_int(), stride[0].maybe_as_int(),
      stride[1].maybe_as_int(),          padding[0].maybe_as_int(),         padding[1].maybe_as_int(),
      dilation[0].maybe_as_int(),        dilation[1].maybe_as_int()};
  for (const std::optional<int64_t>& v : sizes) {
    if (!v.has_value()) {
      return;
    }
  }
  const int64_t batch = *sizes[0], channels = *sizes[1], out_channels = *sizes[4], weight_channels = *sizes[5];
  const int64_t kernel[2] = {*sizes[6], *sizes[7]};
  const int64_t extent[2] = {*sizes[2], *sizes[3]};
  checked_mul(op, "weight.size(1) * groups (the input channels the weight takes)", weight_channels, groups);
  const int64_t taps =
      checked_mul(op, "the kernel taps kh * kw (weight.size(2) * weight.size(3))", kernel[0], kernel[1]);
  // The CUDA kernels split a tap index with 32-bit division.
  TORCH_CHECK(taps <= std::numeric_limits<int32_t>::max(), op,
              "expected the kernel taps kh * kw (weight.size(2) * weight.size(3)) to be at most 2^31 - 1, but got ",
              kernel[0], " * ", kernel[1], " = ", taps);
  checked_mul(op, "the offset channels 2 * deform_groups * kh * kw",
              checked_mul(op, "the offset channels 2 * deform_groups * kh * kw", deform_groups, 2), taps);
  const char* padded_name[2] = {"the padded input height H + 2 * padding[0]",
                                "the padded input width W + 2 * padding[1]"};
  const char* span_name[2] = {"the dilated kernel height dilation[0] * (kh - 1) + 1",
                              "the dilated kernel width dilation[1] * (kw - 1) + 1"};
  int64_t out[2] = {0, 0};
  for (int d = 0; d < 2; ++d) {
    const int64_t pad = *sizes[10 + d], dil = *sizes[12 + d], str = *sizes[8 + d];
    const int64_t padded = checked_add(op, padded_name[d], extent[d], checked_mul(op, padded_name[d], pad, 2));
    const int64_t span = checked_add(op, span_name[d], checked_mul(op, span_name[d], dil, kernel[d] - 1), 1);
    if (padded < span) {
      return; // check_common reports the input smaller than the kernel
    }
    out[d] = (padded - span) / str + 1;
  }
  const int64_t plane = checked_mul(op, "the output plane H_out * W_out", out[0], out[1]);
  checked_mul(op, "the output size N * C_out * H_out * W_out",
              checked_mul(op, "the output size N * C_out * H_out * W_out", batch, out_channels), plane);
  const int64_t columns = checked_mul(op, "the column width C_in * kh * kw", channels, taps);
  checked_mul(
      op, "the column buffer of one image (H_out * W_out * C_in * kh * kw elements, in bytes)",
      checked_mul(op, "the column buffer of one image (H_out * W_out * C_in * kh * kw elements)", plane, columns),
      static_cast<int64_t>(input.element_size()));
}

DeformConvChecked check_common(const char* op, const at::Tensor& input, const at::Tensor& offset,
                               const at::Tensor* mask, const at::Tensor& weight, c10::SymIntArrayRef stride,
                               c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups,
                               int64_t deform_groups) {
  TORCH_CHECK(input.dim() == 4, op, "expected input to be a 4-D tensor [N, C_in, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), op, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  TORCH_CHECK(weight.dim() == 4, op, "expected weight to be a 4-D tensor [C_out, C_in / groups, kh, kw], but got a ",
              weight.dim(), "-D tensor of shape ", shape_of(weight));
  check_companion(op, "offset", offset, input);
  if (mask != nullptr) {
    check_companion(op, "mask", *mask, input);
  }
  check_companion(op, "weight", weight, input);
  check_pair(op, "stride", stride, /*zero_allowed=*/false);
  check_pair(op, "padding", padding, /*zero_allowed=*/true);
  check_pair(op, "dilation", dilation, /*zero_allowed=*/false);
  TORCH_CHECK(groups > 0, op, "groups must be positive, but got ", groups);
  TORCH_CHECK(deform_groups > 0, op, "deform_groups must be positive, but got ", deform_groups);

  const c10::SymInt& batch = input.sym_size(0);
  const c10::SymInt& channels = input.sym_size(1);
  const c10::SymInt& height = input.sym_size(2);
  const c10::SymInt& width = input.sym_size(3);
  const c10::SymInt& out_channels = weight.sym_size(0);
  const c10::SymInt& kernel_h = weight.sym_size(2);
  const c10::SymInt& kernel_w = weight.sym_size(3);
  TORCH_SYM_CHECK((channels % groups).sym_eq(0), op, "expected the input channels (C_in = ", channels,
                  ") to be divisible by groups (", groups, ")");
  TORCH_SYM_CHECK((out_channels % groups).sym_eq(0), op,
                  "expected the output channels (weight.size(0) = ", out_channels, ") to be divisible by groups (",
                  groups, ")");
  TORCH_SYM_CHECK((channels % deform_groups).sym_eq(0), op, "expected the input channels (C_in = ", channels,
                  ") to be divisible by deform_groups (", deform_groups, ")");
  TORCH_SYM_CHECK(
      kernel_h.sym_gt(0).sym_and(kernel_w.sym_gt(0)), op,
      "expected weight's kernel size (weight.size(2), weight.size(3)) to be positive, but got weight of shape ",
      shape_of(weight));
  check_size_arithmetic(op, input, weight, stride, padding, dilation, groups, deform_groups);
  TORCH_SYM_CHECK((weight.sym_size(1) * groups).sym_eq(channels), op,
                  "expected weight of shape [C_out, C_in / groups = ", channels / groups,
                  ", kh, kw] (C_in = ", channels, ", groups = ", groups, "), but got ", shape_of(weight));

  // Output size, as a convolution: (H + 2 * pad - (dilation * (kh - 1) + 1)) / stride + 1.
  const c10::SymInt room_h = height + padding[0] * 2 - (dilation[0] * (kernel_h - 1) + 1);
  const c10::SymInt room_w = width + padding[1] * 2 - (dilation[1] * (kernel_w - 1) + 1);
  TORCH_SYM_CHECK(room_h.sym_ge(0).sym_and(room_w.sym_ge(0)), op,
                  "expected a positive output size, but the input (H, W) = (", height, ", ", width, ") with padding ",
                  text_of(padding), " is smaller than the dilated kernel (", dilation[0] * (kernel_h - 1) + 1, ", ",
                  dilation[1] * (kernel_w - 1) + 1, ") (kernel ", kernel_h, "x", kernel_w, ", dilation ",
                  text_of(dilation), ")");
  const c10::SymInt out_h = room_h / stride[0] + 1;
  const c10::SymInt out_w = room_w / stride[1] + 1;
  const c10::SymInt taps = kernel_h * kernel_w;

  check_shape(op, "offset", "[N, 2 * deform_groups * kh * kw, H_out, W_out]", offset,
              {batch, taps * (2 * deform_groups), out_h, out_w});
  if (mask != nullptr) {
    check_shape(op, "mask", "[N, deform_groups * kh * kw, H_out, W_out]", *mask,
                {batch, taps * deform_groups, out_h, out_w});
  }

  DeformConvChecked r;
  DeformConvParams& p = r.params;
  p.kernel_h = concrete_or(kernel_h);
  p.kernel_w = concrete_or(kernel_w);
  p.stride_h = concrete_or(stride[0]);
  p.stride_w = concrete_or(stride[1]);
  p.pad_h = concrete_or(padding[0]);
  p.pad_w = concrete_or(padding[1]);
  p.dilation_h = concrete_or(dilation[0]);
  p.dilation_w = concrete_or(dilation[1]);
  p.groups = groups;
  p.deform_groups = deform_groups;
  p.out_h = concrete_or(out_h);
  p.out_w = concrete_or(out_w);
  r.output_shape = {batch, out_channels, out_h, out_w};
  return r;
}

DeformConvChecked check_forward(const char* op, const at::Tensor& input, const at::Tensor& offset,
                                const at::Tensor* mask, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                int64_t groups, int64_t deform_groups) {
  DeformConvChecked r = check_common(op, input, offset, mask, weight, stride, padding, dilation, groups, deform_groups);
  if (bias.has_value() && bias->defined()) {
    check_companion(op, "bias", *bias, input);
    check_shape(op, "bias", "[C_out]", *bias, {weight.sym_size(0)});
  }
  return r;
}

} // namespace

DeformConvChecked check_deform_conv2d(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                      c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, int64_t groups,
                                      int64_t deform_groups) {
  return check_forward(kDeformConv2dOp, input, offset, nullptr, weight, bias, stride, padding, dilation, groups,
                       deform_groups);
}

DeformConvChecked check_modulated_deform_conv2d(const at::Tensor& input, const at::Tensor& offset,
                                                const at::Tensor& mask, const at::Tensor& weight,
                                                const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                                c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                                int64_t groups, int64_t deform_groups) {
  return check_forward(kModulatedDeformConv2dOp, input, offset, &mask, weight, bias, stride, padding, dilation, groups,
                       deform_groups);
}

DeformConvChecked check_deform_conv2d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                               const at::Tensor& offset, const std::optional<at::Tensor>& mask,
                                               const at::Tensor& weight, c10::SymIntArrayRef stride,
                                               c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                               int64_t groups, int64_t deform_groups) {
  const char* op = kDeformConv2dBackwardOp;
  const bool has_mask = mask.has_value() && mask->defined();
  DeformConvChecked r = check_common(op, input, offset, has_mask ? &*mask : nullptr, weight, stride, padding, dilation,
                                     groups, deform_groups);
  check_companion(op, "grad_output", grad_output, input);
  check_shape(op, "grad_output", "[N, C_out, H_out, W_out]", grad_output, r.output_shape);
  return r;
}

} // namespace detail
} // namespace mmops
