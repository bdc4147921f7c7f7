#pragma once
// RoIAlign geometry and bilinear sampling, shared by the CPU and CUDA kernels.
// Everything here is pure arithmetic on an accumulation type T (float or
// double); the kernels decide how to loop, load and store.
//
// Semantics (mmcv RoIAlign):
//  * box corners are scaled by spatial_scale; aligned boxes are shifted by -0.5;
//    unaligned boxes have width/height clamped to at least 1;
//  * each output bin takes grid_h x grid_w samples at the centres of a regular
//    sub-grid; sampling_ratio > 0 fixes the grid, 0 makes it ceil(bin size);
//  * a sample outside [-1, H] x [-1, W] is worth 0, otherwise it is clamped
//    into the map and bilinearly interpolated.
// Defined extras: non-finite box coordinates give an invalid box (zeros, no
// gradient, aligned or not); an adaptive grid is capped at kMaxAdaptiveGrid per
// side (a fixed one is at most kMaxGridSide, checked by the callers); an empty
// map (H or W == 0) makes every sample worth 0.

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"

#include <cmath>
#include <cstdint>

namespace mmops {
namespace roi_align_math {

using host_device_math::batch_index;
using host_device_math::ceil_of;
using host_device_math::is_finite;
using host_device_math::MaxTracker;

// Samples per bin side: the adaptive grid is capped here, and the validation
// (src/roi_align/roi_align_checks.cpp) rejects a larger sampling_ratio, so a
// bin never takes more than kMaxGridSide^2 samples (and iy * grid_w + ix, the
// int32 argmax, stays small).
constexpr int kMaxGridSide = 512;
constexpr int kMaxAdaptiveGrid = kMaxGridSide;

// One roi in feature-map coordinates.
template <typename T>
struct RoiBox {
  T start_y, start_x; // top-left corner
  T bin_h, bin_w;     // size of one output bin
  int grid_h, grid_w; // samples per bin side; 0 means the bin has no samples
  bool valid;         // false when a coordinate is not finite
};

// Samples per bin side.
template <typename T>
C10_HOST_DEVICE inline int samples_per_bin(T roi_size, int64_t pooled, int64_t sampling_ratio) {
  if (sampling_ratio > 0) {
    return static_cast<int>(sampling_ratio);
  }
  const T n = ceil_of(roi_size / static_cast<T>(pooled));
  if (!(n > T(0))) {
    return 0;
  }
  return n < T(kMaxAdaptiveGrid) ? static_cast<int>(n) : kMaxAdaptiveGrid;
}

template <typename T>
C10_HOST_DEVICE inline RoiBox<T> make_roi_box(T x1, T y1, T x2, T y2, T spatial_scale, bool aligned, int64_t pooled_h,
                                              int64_t pooled_w, int64_t sampling_ratio) {
  const T offset = aligned ? T(0.5) : T(0);
  RoiBox<T> box;
  box.start_x = x1 * spatial_scale - offset;
  box.start_y = y1 * spatial_scale - offset;
  const T end_x = x2 * spatial_scale - offset;
  const T end_y = y2 * spatial_scale - offset;
  T roi_w = end_x - box.start_x;
  T roi_h = end_y - box.start_y;
  // The one place that defines a non-finite roi (every kernel, both devices):
  // any corner that is not finite, or a size that overflows, makes the box
  // invalid. Decided before the unaligned clamp, which would turn a NaN or
  // -inf size into 1.
  box.valid = is_finite(box.start_x) && is_finite(box.start_y) && is_finite(end_x) && is_finite(end_y) &&
              is_finite(roi_w) && is_finite(roi_h);
  if (!aligned) {
    roi_w = roi_w > T(1) ? roi_w : T(1);
    roi_h = roi_h > T(1) ? roi_h : T(1);
  }
  box.bin_h = roi_h / static_cast<T>(pooled_h);
  box.bin_w = roi_w / static_cast<T>(pooled_w);
  box.grid_h = box.valid ? samples_per_bin(roi_h, pooled_h, sampling_ratio) : 0;
  box.grid_w = box.valid ? samples_per_bin(roi_w, pooled_w, sampling_ratio) : 0;
  return box;
}

// mmdet's FPN level of a roi: floor(log2(sqrt(w * h) / finest_scale + 1e-6)),
// clamped to [0, num_levels); level 0 for a box without a finite positive area.
template <typename T>
C10_HOST_DEVICE inline int roi_level(T x1, T y1, T x2, T y2, T finest_scale, int num_levels) {
  if (num_levels <= 1) {
    return 0;
  }
#ifdef __CUDA_ARCH__
  const T level = floor(log2(sqrt((x2 - x1) * (y2 - y1)) / finest_scale + T(1e-6)));
#else
  const T level = std::floor(std::log2(std::sqrt((x2 - x1) * (y2 - y1)) / finest_scale + T(1e-6)));
#endif
  if (!(level > T(0))) {
    return 0; // also NaN
  }
  return level < T(num_levels - 1) ? static_cast<int>(level) : num_levels - 1;
}

// Where one roi pools from: its feature map (level), image (batch, -1 when the
// roi pools zeros: bad batch index or non-finite box) and box on that map.
template <typename T>
struct RoiSource {
  int level;
  int64_t batch;
  RoiBox<T> box;
};

// values[index] for a small array indexed at run time. Written as an unrolled
// select so that a kernel-parameter array stays in the parameter bank: a
// run-time index would make every CUDA thread copy the array to local memory.
template <typename T, int N>
C10_HOST_DEVICE inline T select_entry(const T (&values)[N], int index) {
  T chosen = values[0];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 1; i < N; ++i) {
    chosen = i == index ? values[i] : chosen;
  }
  return chosen;
}

// roi = (batch_index, x1, y1, x2, y2) in image coordinates.
template <typename T, int N>
C10_HOST_DEVICE inline RoiSource<T> locate_roi(T batch_value, T x1, T y1, T x2, T y2, int64_t batch_size,
                                               const double (&spatial_scales)[N], int num_levels, double finest_scale,
                                               bool aligned, int64_t pooled_h, int64_t pooled_w,
                                               int64_t sampling_ratio) {
  RoiSource<T> s;
  s.level = roi_level(x1, y1, x2, y2, static_cast<T>(finest_scale), num_levels);
  s.box = make_roi_box(x1, y1, x2, y2, static_cast<T>(select_entry(spatial_scales, s.level)), aligned, pooled_h,
                       pooled_w, sampling_ratio);
  s.batch = s.box.valid ? batch_index(batch_value, batch_size) : -1;
  return s;
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

// Running maximum over a bin's samples for pool_mode="max" (index: the sample
// iy * grid_w + ix): host_device_math::MaxTracker.
} // namespace roi_align_math
} // namespace mmops
