#pragma once
// Public C++ API of mmops::tin_shift (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>

namespace mmops {

// The Temporal Interlace shift of TIN (mmcv.ops.tin_shift):
//   input:  [N, T, C, H * W] (mmcv's layout) or [N, T, C, H, W], floating point
//   shift:  [N, G] int32 or int64, G >= 1 dividing C: channels
//           [g * C / G, (g + 1) * C / G) of clip n move shift[n, g] frames
//           (positive: towards later frames)
//   output: the shape of input (contiguous): output[n, t, c] = input[n, t - s, c]
//           with s = shift[n, c / (C / G)], 0 where t - s is outside [0, T)
//           (so any |shift| >= T gives zeros).
// Differentiable w.r.t. input (the gradient is grad_output moved by -shift);
// shift gets no gradient.
at::Tensor tin_shift(const at::Tensor& input, const at::Tensor& shift);

} // namespace mmops
