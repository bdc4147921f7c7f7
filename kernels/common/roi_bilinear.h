#pragma once
// Sampling of roi pooling bins and mmcv's border-clamped bilinear rule, shared
// by the CPU and CUDA kernels of roi_align and deform_roi_pool (mmcv's
// bilinear_interpolate of common_cuda_helper.hpp):
//  * a sample outside [-1, size] on an axis is worth 0 (also NaN);
//  * otherwise a coordinate below 0 is clamped to 0 and one at or past size - 1
//    to size - 1 (both neighbours the last pixel); the rest blends floor and
//    floor + 1.
// This is not common/bilinear_zero_pad.h (deform_conv, ms_deform_attn), where
// the strip (-1, 0) blends with a zero neighbour instead of clamping.

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"

#include <cstdint>

namespace mmops {
namespace roi_bilinear {

// Samples per bin side: the adaptive grid is capped here, and the validation
// (src/roi_align/roi_align_checks.cpp, src/deform_roi_pool/deform_roi_pool_checks.cpp) rejects a larger sampling_ratio,
// so a bin never takes more than kMaxGridSide^2 samples (and iy * grid_w + ix, the int32 argmax, stays small).
constexpr int kMaxGridSide = 512;
constexpr int kMaxAdaptiveGrid = kMaxGridSide;

// Samples per bin side.
template <typename T>
C10_HOST_DEVICE inline int samples_per_bin(T roi_size, int64_t pooled, int64_t sampling_ratio) {
  if (sampling_ratio > 0) {
    return static_cast<int>(sampling_ratio);
  }
  const T n = host_device_math::ceil_of(roi_size / static_cast<T>(pooled));
  if (!(n > T(0))) {
    return 0;
  }
  return n < T(kMaxAdaptiveGrid) ? static_cast<int>(n) : kMaxAdaptiveGrid;
}

// Coordinate of sample `i` (of `grid`) in bin `p` along one axis.
template <typename T>
C10_HOST_DEVICE inline T sample_coord(T start, T bin_size, int64_t p, int i, int grid) {
  return start + static_cast<T>(p) * bin_size + (static_cast<T>(i) + T(0.5)) * bin_size / static_cast<T>(grid);
}

// Bilinear interpolation is separable: one axis' two neighbours and weights.
template <typename T>
struct AxisTap {
  int lo, hi;   // neighbour indices along the axis
  T w_lo, w_hi; // their weights
  bool valid;   // false: the sample lies outside [-1, size] and is worth 0
};

template <typename T>
C10_HOST_DEVICE inline AxisTap<T> axis_tap(T coord, int64_t size) {
  AxisTap<T> tap{0, 0, T(0), T(0), false};
  if (size <= 0 || !(coord >= T(-1) && coord <= static_cast<T>(size))) {
    return tap; // also NaN
  }
  if (coord < T(0)) {
    coord = T(0);
  }
  int lo = static_cast<int>(coord);
  int hi;
  if (lo >= size - 1) {
    lo = hi = static_cast<int>(size - 1);
    coord = static_cast<T>(lo);
  } else {
    hi = lo + 1;
  }
  const T frac = coord - static_cast<T>(lo);
  tap.lo = lo;
  tap.hi = hi;
  tap.w_lo = T(1) - frac;
  tap.w_hi = frac;
  tap.valid = true;
  return tap;
}

// The four neighbours (offsets into a row-major H x W plane) and weights of a
// sample whose axis taps are both valid.
template <typename T>
struct Corners {
  int64_t offset[4];
  T weight[4];
};

template <typename T>
C10_HOST_DEVICE inline Corners<T> corners(const AxisTap<T>& ty, const AxisTap<T>& tx, int64_t width) {
  Corners<T> c;
  c.offset[0] = ty.lo * width + tx.lo;
  c.offset[1] = ty.lo * width + tx.hi;
  c.offset[2] = ty.hi * width + tx.lo;
  c.offset[3] = ty.hi * width + tx.hi;
  c.weight[0] = ty.w_lo * tx.w_lo;
  c.weight[1] = ty.w_lo * tx.w_hi;
  c.weight[2] = ty.w_hi * tx.w_lo;
  c.weight[3] = ty.w_hi * tx.w_hi;
  return c;
}

// d coord_used / d coord of axis_tap: 1 where the blend moves with the
// coordinate, 0 where it is clamped (below 0, at or past size - 1) or worth 0.
// The derivative of a sample's value along the axis is slope * (v_hi - v_lo).
template <typename T>
C10_HOST_DEVICE inline T axis_slope(T coord, int64_t size) {
  return coord >= T(0) && coord < static_cast<T>(size - 1) ? T(1) : T(0);
}

} // namespace roi_bilinear
} // namespace mmops
