#pragma once
// Math of filtered_lrelu shared by the CPU and CUDA kernels (no ATen).
//
// Every pass of the op (the forward, the gradient of input and its adjoint) is
// one "fused pass" over each plane, described per axis by a PassAxis:
//   stage 1: the signal z (size `in`) zero-inserted by `up` (z[i] at u[i * up])
//            is convolved with filter 1: the intermediate sample m in [0, mid)
//            is sum_k u[m + off1 + k] * k1[k1_size - 1 - k], k in [0, k1_size)
//            (the flipped filter slides over the signal: a true convolution);
//   pointwise: leaky ReLU times gain, clamp (the forward; it may record a mask
//            code per intermediate sample) or the recorded slope (the others);
//   stage 2: output o in [0, out) is sum_k t[o * down + off2 + k] *
//            k2[k2_size - 1 - k], the intermediate t zero outside [0, mid).
// The forward is (z = input + bias, up, -pad0, filter_up, mid, down, 0,
// filter_down); the gradient of input is (z = grad_output, down, 1 - fd,
// flip(filter_down), mid, up, pad0 + 1 - fu, flip(filter_up)); the adjoint of
// that gradient (double backward) has the forward's geometry.

#include "common/fir_taps.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace filtered_lrelu_math {

// Limits of the arguments (filtered_lrelu_checks.cpp): with them every index
// below fits in int64.
constexpr int64_t kMaxFactor = int64_t(1) << 16;     // up, down
constexpr int64_t kMaxPad = int64_t(1) << 40;        // |padding|
constexpr int64_t kMaxSide = (int64_t(1) << 31) - 1; // H, W, filter sides, the intermediate's sides

// The mask codes, one byte per intermediate sample: the factor of the
// gradient there.
constexpr uint8_t kPositive = 0; // gain
constexpr uint8_t kNegative = 1; // gain * slope
constexpr uint8_t kClamped = 2;  // 0

using fir::floor_div;
using fir::floor_mod;

// One axis of a fused pass (see above).
struct PassAxis {
  int64_t in = 0, up = 1, off1 = 0, k1 = 1; // stage 1
  int64_t mid = 0;                          // the intermediate's size
  int64_t down = 1, off2 = 0, k2 = 1;       // stage 2
  int64_t out = 0;
};

template <typename index_t>
using Taps = fir::FirTaps<index_t>;

// The taps k in [0, ksize) whose position pos + k in the zero-inserted signal
// (factor up) is a multiple of up with an index in [0, in) (common/fir_taps.h).
// Stage 2 is the case up = 1 (in = mid).
template <typename index_t>
C10_HOST_DEVICE inline Taps<index_t> axis_taps(index_t pos, index_t up, index_t ksize, index_t in) {
  return fir::fir_taps(pos, up, ksize, in);
}

// The forward's pointwise step: leaky ReLU (slope below 0), times gain, then
// clamped to [-clamp, clamp] when clamp >= 0; code receives the mask code.
// NaN stays NaN (code kPositive).
template <typename acc_t>
C10_HOST_DEVICE inline acc_t lrelu_gain_clamp(acc_t v, acc_t gain, acc_t slope, acc_t clamp, uint8_t& code) {
  code = kPositive;
  if (v < acc_t(0)) {
    v *= slope;
    code = kNegative;
  }
  v *= gain;
  if (clamp >= acc_t(0) && (v > clamp || v < -clamp)) {
    v = v > acc_t(0) ? clamp : -clamp;
    code = kClamped;
  }
  return v;
}

// The derivative of lrelu_gain_clamp where it gave `code`.
template <typename acc_t>
C10_HOST_DEVICE inline acc_t mask_factor(uint8_t code, acc_t gain, acc_t slope) {
  return code == kPositive ? gain : (code == kNegative ? gain * slope : acc_t(0));
}

} // namespace filtered_lrelu_math

// What the kernels need (the validation fills it; all int64). mid: the
// intermediate grid (the upsampled, padded, up-filtered input) the mask covers.
struct FilteredLreluParams {
  int64_t batch = 0, channels = 0, planes = 0; // planes = N * C
  int64_t in_h = 0, in_w = 0;
  int64_t mid_h = 0, mid_w = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t fu_h = 1, fu_w = 1, fd_h = 1, fd_w = 1;
  int64_t up = 1, down = 1;
  int64_t pad_x0 = 0, pad_x1 = 0, pad_y0 = 0, pad_y1 = 0;
  double gain = 1, slope = 0.2;
  double clamp = -1; // < 0: none
};

// The pass geometry of the forward (and of the double backward's adjoint) and
// of the gradient of input, along y (vertical = true) or x.
inline filtered_lrelu_math::PassAxis forward_axis(const FilteredLreluParams& p, bool vertical) {
  filtered_lrelu_math::PassAxis a;
  a.in = vertical ? p.in_h : p.in_w;
  a.up = p.up;
  a.off1 = -(vertical ? p.pad_y0 : p.pad_x0);
  a.k1 = vertical ? p.fu_h : p.fu_w;
  a.mid = vertical ? p.mid_h : p.mid_w;
  a.down = p.down;
  a.off2 = 0;
  a.k2 = vertical ? p.fd_h : p.fd_w;
  a.out = vertical ? p.out_h : p.out_w;
  return a;
}

inline filtered_lrelu_math::PassAxis backward_axis(const FilteredLreluParams& p, bool vertical) {
  filtered_lrelu_math::PassAxis a;
  const int64_t fu = vertical ? p.fu_h : p.fu_w;
  const int64_t fd = vertical ? p.fd_h : p.fd_w;
  a.in = vertical ? p.out_h : p.out_w;
  a.up = p.down;
  a.off1 = 1 - fd;
  a.k1 = fd; // flip(filter_down)
  a.mid = vertical ? p.mid_h : p.mid_w;
  a.down = p.up;
  a.off2 = (vertical ? p.pad_y0 : p.pad_x0) + 1 - fu;
  a.k2 = fu; // flip(filter_up)
  a.out = vertical ? p.in_h : p.in_w;
  return a;
}

} // namespace mmops
