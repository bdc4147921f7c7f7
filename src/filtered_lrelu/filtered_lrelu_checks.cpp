// Argument validation of filtered_lrelu, on every backend (the meta kernels
// run it too, so fake tensors raise the same errors). Bounds come before
// arithmetic: H, W and the filter sides <= 2^31 - 1, up and down in [1, 2^16],
// |padding| <= 2^40, so the intermediate sides (H * up + pad0 + pad1 - fu + 1)
// are computed in int64 without overflow, then checked to lie in
// [filter_down's side, 2^31 - 1].

#include "filtered_lrelu/filtered_lrelu_ops.h"

#include "common/check_utils.h"

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <cmath>
#include <cstdint>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kFilteredLreluOp;
using filtered_lrelu_math::kMaxFactor;
using filtered_lrelu_math::kMaxPad;
using filtered_lrelu_math::kMaxSide;

void check_filter(const char* name, const at::Tensor& filter, const at::Tensor& data) {
  TORCH_CHECK(filter.dim() == 2, kOp, "expected ", name, " to be a 2-D tensor [", name, "_h, ", name,
              "_w] (the Python wrapper takes [taps] and None too), but got a ", filter.dim(), "-D tensor of shape ",
              shape_of(filter));
  TORCH_CHECK(at::isFloatingType(filter.scalar_type()), kOp, "expected ", name,
              " to have a floating point dtype, but got ", filter.scalar_type());
  TORCH_CHECK(filter.device() == data.device(), kOp, "expected ", name, " on the device of the data (", data.device(),
              "), but got ", filter.device());
  TORCH_SYM_CHECK(filter.sym_size(0).sym_ge(1) & filter.sym_size(1).sym_ge(1), kOp, "expected a non-empty ", name,
                  ", but got ", name, " of shape ", shape_of(filter));
  TORCH_SYM_CHECK(filter.sym_size(0).sym_le(kMaxSide) & filter.sym_size(1).sym_le(kMaxSide), kOp, "expected ", name,
                  " sides of at most 2^31 - 1, but got ", name, " of shape ", shape_of(filter));
}

void check_factor(const char* name, int64_t f) {
  TORCH_CHECK(f >= 1 && f <= kMaxFactor, kOp, "expected ", name, " in [1, 2^16], but got ", name, " = ", f);
}

void check_padding(c10::SymIntArrayRef padding) {
  TORCH_CHECK(padding.size() == 4, kOp, "expected padding to hold 4 values [pad_x0, pad_x1, pad_y0, pad_y1], but got ",
              padding.size(), " values ", padding);
  for (const c10::SymInt& v : padding) {
    TORCH_SYM_CHECK(v.sym_ge(-kMaxPad) & v.sym_le(kMaxPad), kOp,
                    "expected padding values in [-2^40, 2^40], but got padding = ", padding);
  }
}

void check_gain_slope(double gain, double slope) {
  TORCH_CHECK(std::isfinite(gain) && gain > 0, kOp, "expected a finite gain > 0, but got gain = ", gain);
  TORCH_CHECK(std::isfinite(slope) && slope >= 0, kOp, "expected a finite slope >= 0, but got slope = ", slope);
}

// The sizes of a call from the input's [N, C, H, W] (checked: H, W in [0, 2^31 - 1]), the
// filters, factors and padding (checked).
FilteredLreluParams plan(const c10::SymInt& n, const c10::SymInt& c, const c10::SymInt& h, const c10::SymInt& w,
                         const at::Tensor& filter_up, const at::Tensor& filter_down, int64_t up, int64_t down,
                         c10::SymIntArrayRef padding, FilteredLreluShape* shape) {
  const c10::SymInt &fu_h = filter_up.sym_size(0), &fu_w = filter_up.sym_size(1);
  const c10::SymInt &fd_h = filter_down.sym_size(0), &fd_w = filter_down.sym_size(1);
  const c10::SymInt mid_h = h * up + padding[2] + padding[3] - fu_h + 1;
  const c10::SymInt mid_w = w * up + padding[0] + padding[1] - fu_w + 1;
  TORCH_SYM_CHECK(mid_h.sym_ge(fd_h) & mid_w.sym_ge(fd_w), kOp,
                  "expected an output of at least 1 x 1: the upsampled, padded, up-filtered input (H * up + pad_y0 + "
                  "pad_y1 - filter_up_h + 1 = ",
                  mid_h, ", W * up + pad_x0 + pad_x1 - filter_up_w + 1 = ", mid_w, ") must be at least filter_down (",
                  shape_of(filter_down), "); input [N, C, H, W] = [", n, ", ", c, ", ", h, ", ", w,
                  "], filter_up of shape ", shape_of(filter_up), ", up = ", up, ", padding = ", padding);
  TORCH_SYM_CHECK(mid_h.sym_le(kMaxSide) & mid_w.sym_le(kMaxSide), kOp,
                  "expected the upsampled, padded input to be at most 2^31 - 1 on each side, but got ", mid_h, " x ",
                  mid_w, " (input [N, C, H, W] = [", n, ", ", c, ", ", h, ", ", w, "], up = ", up,
                  ", padding = ", padding, ")");
  const c10::SymInt out_h = (mid_h - fd_h) / down + 1; // both >= 0 (checked): floor division
  const c10::SymInt out_w = (mid_w - fd_w) / down + 1;
  if (shape != nullptr) {
    *shape = {n, c, h, w, mid_h, mid_w, out_h, out_w};
  }

  FilteredLreluParams p{};
  p.batch = int_or_unknown(n);
  p.channels = int_or_unknown(c);
  p.planes = p.batch >= 0 && p.channels >= 0 ? checked_mul(kOp, "N * C", p.batch, p.channels) : -1;
  p.in_h = int_or_unknown(h);
  p.in_w = int_or_unknown(w);
  p.mid_h = int_or_unknown(mid_h);
  p.mid_w = int_or_unknown(mid_w);
  p.out_h = int_or_unknown(out_h);
  p.out_w = int_or_unknown(out_w);
  p.fu_h = int_or_unknown(fu_h);
  p.fu_w = int_or_unknown(fu_w);
  p.fd_h = int_or_unknown(fd_h);
  p.fd_w = int_or_unknown(fd_w);
  p.up = up;
  p.down = down;
  p.pad_x0 = int_or_unknown(padding[0]);
  p.pad_x1 = int_or_unknown(padding[1]);
  p.pad_y0 = int_or_unknown(padding[2]);
  p.pad_y1 = int_or_unknown(padding[3]);
  if (p.planes >= 0 && p.mid_h >= 0 && p.mid_w >= 0) {
    checked_product(kOp, "the intermediate's element count N * C * mid_h * mid_w", {p.planes, p.mid_h, p.mid_w});
  }
  return p;
}

void check_sides(const char* what, const c10::SymInt& h, const c10::SymInt& w) {
  TORCH_SYM_CHECK(h.sym_le(kMaxSide) & w.sym_le(kMaxSide), kOp, "expected ", what,
                  " H and W to be at most 2^31 - 1, but got ", h, " x ", w);
}

} // namespace

FilteredLreluParams check_filtered_lrelu_forward(const at::Tensor& input, const at::Tensor& filter_up,
                                                 const at::Tensor& filter_down, const std::optional<at::Tensor>& bias,
                                                 int64_t up, int64_t down, c10::SymIntArrayRef padding, double gain,
                                                 double slope, std::optional<double> clamp, FilteredLreluShape* shape) {
  TORCH_CHECK(input.dim() == 4, kOp, "expected input to be a 4-D tensor [N, C, H, W], but got a ", input.dim(),
              "-D tensor of shape ", shape_of(input));
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), kOp, "expected input to have a floating point dtype, but got ",
              input.scalar_type());
  check_filter("filter_up", filter_up, input);
  check_filter("filter_down", filter_down, input);
  if (bias.has_value()) {
    TORCH_CHECK(bias->dim() == 1, kOp, "expected bias to be a 1-D tensor [C], but got a ", bias->dim(),
                "-D tensor of shape ", shape_of(*bias));
    TORCH_SYM_CHECK(bias->sym_size(0).sym_eq(input.sym_size(1)), kOp, "expected bias of shape [C] = [",
                    input.sym_size(1), "] (input's channels), but got bias of shape ", shape_of(*bias));
    TORCH_CHECK(bias->scalar_type() == input.scalar_type(), kOp, "expected bias to have input's dtype (",
                input.scalar_type(), "), but got ", bias->scalar_type());
    TORCH_CHECK(bias->device() == input.device(), kOp, "expected bias on the device of input (", input.device(),
                "), but got ", bias->device());
  }
  check_factor("up", up);
  check_factor("down", down);
  check_padding(padding);
  check_gain_slope(gain, slope);
  TORCH_CHECK(!clamp.has_value() || (!std::isnan(*clamp) && *clamp >= 0), kOp,
              "expected clamp to be None or >= 0, but got clamp = ", clamp.value_or(0.0));
  check_sides("input's", input.sym_size(2), input.sym_size(3));
  FilteredLreluParams p = plan(input.sym_size(0), input.sym_size(1), input.sym_size(2), input.sym_size(3), filter_up,
                               filter_down, up, down, padding, shape);
  if (p.planes >= 0 && p.out_h >= 0 && p.out_w >= 0) {
    checked_product(kOp, "the output's element count N * C * out_h * out_w", {p.planes, p.out_h, p.out_w});
  }
  p.gain = gain;
  p.slope = slope;
  p.clamp = clamp.has_value() ? *clamp : -1.0;
  return p;
}

FilteredLreluParams check_filtered_lrelu_backward(const at::Tensor& grad, const at::Tensor& mask,
                                                  const at::Tensor& filter_up, const at::Tensor& filter_down,
                                                  int64_t up, int64_t down, c10::SymIntArrayRef padding, double gain,
                                                  double slope, c10::SymIntArrayRef input_size, bool transpose,
                                                  FilteredLreluShape* shape) {
  TORCH_CHECK(grad.dim() == 4, kOp, "expected grad to be a 4-D tensor [N, C, H, W], but got a ", grad.dim(),
              "-D tensor of shape ", shape_of(grad));
  TORCH_CHECK(at::isFloatingType(grad.scalar_type()), kOp, "expected grad to have a floating point dtype, but got ",
              grad.scalar_type());
  TORCH_CHECK(mask.dim() == 4 && mask.scalar_type() == at::kByte, kOp,
              "expected mask to be a 4-D uint8 tensor [N, C, mid_h, mid_w] (the forward's), but got a ", mask.dim(),
              "-D ", mask.scalar_type(), " tensor of shape ", shape_of(mask));
  TORCH_CHECK(mask.device() == grad.device(), kOp, "expected mask on the device of grad (", grad.device(),
              "), but got ", mask.device());
  check_filter("filter_up", filter_up, grad);
  check_filter("filter_down", filter_down, grad);
  check_factor("up", up);
  check_factor("down", down);
  check_padding(padding);
  check_gain_slope(gain, slope);
  TORCH_CHECK(input_size.size() == 2, kOp, "expected input_size to hold 2 values [H, W], but got ", input_size.size(),
              " values ", input_size);
  TORCH_SYM_CHECK(input_size[0].sym_ge(0) & input_size[1].sym_ge(0), kOp,
                  "expected input_size values >= 0, but got input_size = ", input_size);
  check_sides("input_size's", input_size[0], input_size[1]);
  FilteredLreluShape s;
  FilteredLreluParams p = plan(grad.sym_size(0), grad.sym_size(1), input_size[0], input_size[1], filter_up, filter_down,
                               up, down, padding, &s);
  const c10::SymInt& gh = transpose ? s.in_h : s.out_h;
  const c10::SymInt& gw = transpose ? s.in_w : s.out_w;
  TORCH_SYM_CHECK(grad.sym_size(2).sym_eq(gh) & grad.sym_size(3).sym_eq(gw), kOp, "expected grad of shape [N, C, ", gh,
                  ", ", gw, "] (", transpose ? "the input's" : "the output's", "), but got ", shape_of(grad));
  TORCH_SYM_CHECK(mask.sym_size(0).sym_eq(s.batch) & mask.sym_size(1).sym_eq(s.channels) &
                      mask.sym_size(2).sym_eq(s.mid_h) & mask.sym_size(3).sym_eq(s.mid_w),
                  kOp, "expected mask of shape [", s.batch, ", ", s.channels, ", ", s.mid_h, ", ", s.mid_w,
                  "] (the forward's), but got ", shape_of(mask));
  if (shape != nullptr) {
    *shape = s;
  }
  p.gain = gain;
  p.slope = slope;
  p.clamp = -1.0;
  return p;
}

} // namespace detail
} // namespace mmops
