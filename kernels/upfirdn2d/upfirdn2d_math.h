#pragma once
// Math of upfirdn2d shared by the CPU and CUDA kernels (no ATen).
//
// Along one axis, output o reads the zero-inserted, padded signal u at
// positions m = o * down - pad0 + k (k in [0, K), the flipped kernel's tap),
// and u[m] is input[m / up] when m is a multiple of up (and m / up in
// [0, in)), else 0: the taps of common/fir_taps.h at pos = o * down - pad0.

#include "common/fir_taps.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace upfirdn2d_math {

// Limits of the arguments (upfirdn2d_checks.cpp): with them every index below
// fits in int64 (o * down <= 2^31 * 2^16, |pad| <= 2^40).
constexpr int64_t kMaxFactor = int64_t(1) << 16;     // up, down
constexpr int64_t kMaxPad = int64_t(1) << 40;        // |pad|
constexpr int64_t kMaxSide = (int64_t(1) << 31) - 1; // H, W, the padded upsampled sides

using fir::floor_div;
using fir::floor_mod;
template <typename index_t>
using AxisTaps = fir::FirTaps<index_t>;

// The taps of output o along an axis (in: the input's size, ksize: the kernel's).
template <typename index_t>
C10_HOST_DEVICE inline AxisTaps<index_t> axis_taps(index_t o, index_t up, index_t down, index_t pad0, index_t ksize,
                                                   index_t in) {
  return fir::fir_taps(o * down - pad0, up, ksize, in);
}

// The output size along an axis: (in * up + pad0 + pad1 - ksize) / down + 1
// (checked to be >= 1 by the validation).
C10_HOST_DEVICE inline int64_t output_side(int64_t in, int64_t up, int64_t down, int64_t pad0, int64_t pad1,
                                           int64_t ksize) {
  return (in * up + pad0 + pad1 - ksize) / down + 1;
}

} // namespace upfirdn2d_math

// What the kernels need (the validation fills it; all int64).
struct Upfirdn2dParams {
  int64_t planes = 0; // N * C
  int64_t in_h = 0, in_w = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t up_x = 1, up_y = 1, down_x = 1, down_y = 1;
  int64_t pad_x0 = 0, pad_x1 = 0, pad_y0 = 0, pad_y1 = 0;
};

} // namespace mmops
