// Argument validation of tin_shift, on every backend (the meta kernels run it
// too, so fake tensors raise the same errors). The shift values are not
// checked: any int32 / int64 value is defined (|shift| >= T gives zeros).

#include "tin_shift/tin_shift_ops.h"

#include "common/check_utils.h"

#include <c10/core/SymInt.h>

namespace mmops {
namespace detail {
namespace {

constexpr const char* kOp = kTinShiftOp;

// `what` (input or grad_output) [N, T, C, *spatial] against shift [N, G].
TinShiftParams check_frames(const char* what, const at::Tensor& x, const at::Tensor& shift) {
  TORCH_CHECK(x.dim() == 4 || x.dim() == 5, kOp, "expected ", what,
              " to be a 4-D tensor [N, T, C, H * W] or a 5-D tensor [N, T, C, H, W], but got a ", x.dim(),
              "-D tensor of shape ", shape_of(x));
  TORCH_CHECK(at::isFloatingType(x.scalar_type()), kOp, "expected ", what, " to have a floating point dtype, but got ",
              x.scalar_type());
  TORCH_CHECK(shift.dim() == 2, kOp,
              "expected shift to be a 2-D tensor [N, G] (frames per clip and channel group), "
              "but got a ",
              shift.dim(), "-D tensor of shape ", shape_of(shift));
  TORCH_CHECK(shift.scalar_type() == at::kInt || shift.scalar_type() == at::kLong, kOp,
              "expected shift to be an int32 or int64 tensor (whole frames), but got ", shift.scalar_type());
  TORCH_CHECK(shift.device() == x.device(), kOp, "expected shift on the device of ", what, " (", x.device(),
              "), but got ", shift.device());
  TORCH_SYM_CHECK(shift.sym_size(0).sym_eq(x.sym_size(0)), kOp,
                  "expected shift to hold one row per clip, N = ", x.sym_size(0), " (", what,
                  "'s first dim), but got shift of shape ", shape_of(shift), " for ", what, " of shape ", shape_of(x));
  const c10::SymInt& groups = shift.sym_size(1);
  TORCH_SYM_CHECK(groups.sym_ge(1), kOp,
                  "expected shift to have G >= 1 columns (channel groups), but got shift of shape ", shape_of(shift));
  const c10::SymInt& channels = x.sym_size(2);
  TORCH_SYM_CHECK((channels % groups).sym_eq(0), kOp, "expected ", what, "'s C = ", channels,
                  " channels (dim 2) to be a multiple of shift's G = ", groups, " channel groups, but got ", what,
                  " of shape ", shape_of(x), " and shift of shape ", shape_of(shift));
  c10::SymInt positions = x.sym_size(3);
  if (x.dim() == 5) {
    positions = positions * x.sym_size(4); // a tensor's sizes: their product fits int64
  }
  TinShiftParams p{};
  p.batch = int_or_unknown(x.sym_size(0));
  p.frames = int_or_unknown(x.sym_size(1));
  p.channels = int_or_unknown(channels);
  p.positions = int_or_unknown(positions);
  p.groups = int_or_unknown(groups);
  p.group_channels = p.channels >= 0 && p.groups >= 1 ? p.channels / p.groups : -1;
  return p;
}

} // namespace

TinShiftParams check_tin_shift_forward(const at::Tensor& input, const at::Tensor& shift) {
  return check_frames("input", input, shift);
}

TinShiftParams check_tin_shift_backward(const at::Tensor& grad_output, const at::Tensor& shift) {
  return check_frames("grad_output", grad_output, shift);
}

} // namespace detail
} // namespace mmops
