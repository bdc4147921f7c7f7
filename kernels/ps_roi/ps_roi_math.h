#pragma once
// Position-sensitive RoI geometry (torchvision's ps_roi_align / ps_roi_pool),
// shared by the CPU and CUDA kernels. Bin (ph, pw) of output channel c reads
// input channel (c * PH + ph) * PW + pw only.
//
// ps_roi_align: corners scaled by spatial_scale minus 0.5 (torchvision has no
// aligned switch here and always shifts), no clamp of the roi size (a
// reversed box has negative bins); a bin averages a grid of bilinear samples
// (common/roi_bilinear.h: worth 0 outside [-1, size], clamped at the border),
// sampling_ratio > 0 samples per side, else ceil(roi size / pooled size),
// capped at roi_bilinear::kMaxAdaptiveGrid. A bin with no sample is 0.
//
// ps_roi_pool: corners scaled and rounded half away from zero, roi size
// max(end - start, 1); bin p of an axis is [floor(p * bin), ceil((p + 1) * bin))
// + start clamped into [0, size - 1] (torchvision's forward clamp: the last
// row and column of the map are never pooled); the bin's mean, 0 when empty.
//
// Defined extras (both ops): a non-finite box coordinate, or a batch index
// outside [0, N), makes the roi pool zeros (no gradient); rounded coordinates
// are clamped to +-2^24 before the integer conversion.

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"
#include "common/roi_bilinear.h"

#include <cstdint>

namespace mmops {
namespace ps_roi_math {

using host_device_math::batch_index;
using host_device_math::ceil_of;
using host_device_math::floor_of;
using host_device_math::is_finite;
using host_device_math::round_away;

// One axis of one roi: where bin p starts and how it is sampled.
template <typename T>
struct Axis {
  T start;          // align: first coordinate; pool: unused
  T bin;            // bin size (align: may be negative or zero)
  int grid;         // align: samples per bin side (0: the bin is empty)
  int64_t start_px; // pool: rounded first pixel
};

template <typename T>
C10_HOST_DEVICE inline Axis<T> align_axis(T lo, T hi, T spatial_scale, int64_t pooled, int64_t sampling_ratio) {
  Axis<T> a;
  a.start = lo * spatial_scale - T(0.5);
  const T size = (hi * spatial_scale - T(0.5)) - a.start;
  a.bin = size / static_cast<T>(pooled);
  a.grid = roi_bilinear::samples_per_bin(size, pooled, sampling_ratio);
  a.start_px = 0;
  return a;
}

constexpr double kMaxCoord = 16777216.0; // 2^24

template <typename T>
C10_HOST_DEVICE inline int64_t rounded_coord(T v) {
  T r = round_away(v);
  r = r < T(-kMaxCoord) ? T(-kMaxCoord) : (r > T(kMaxCoord) ? T(kMaxCoord) : r);
  return static_cast<int64_t>(r);
}

template <typename T>
C10_HOST_DEVICE inline Axis<T> pool_axis(T lo, T hi, T spatial_scale, int64_t pooled) {
  Axis<T> a;
  a.start_px = rounded_coord(lo * spatial_scale);
  const int64_t end = rounded_coord(hi * spatial_scale);
  const int64_t size = end - a.start_px > 1 ? end - a.start_px : 1;
  a.start = T(0);
  a.bin = static_cast<T>(size) / static_cast<T>(pooled);
  a.grid = 0;
  return a;
}

// A roi: its image (-1: pools zeros) and its two axes.
template <typename T>
struct Box {
  int64_t batch;
  Axis<T> y, x;
};

template <typename T>
C10_HOST_DEVICE inline bool finite_box(T x1, T y1, T x2, T y2, T spatial_scale) {
  return is_finite(x1 * spatial_scale) && is_finite(y1 * spatial_scale) && is_finite(x2 * spatial_scale) &&
         is_finite(y2 * spatial_scale);
}

template <typename T>
C10_HOST_DEVICE inline Box<T> align_box(const T* roi, int64_t batch, T spatial_scale, int64_t pooled_h,
                                        int64_t pooled_w, int64_t sampling_ratio) {
  Box<T> b;
  b.batch = batch_index(roi[0], batch);
  if (!finite_box(roi[1], roi[2], roi[3], roi[4], spatial_scale)) {
    b.batch = -1;
  }
  b.y = align_axis(roi[2], roi[4], spatial_scale, pooled_h, sampling_ratio);
  b.x = align_axis(roi[1], roi[3], spatial_scale, pooled_w, sampling_ratio);
  return b;
}

template <typename T>
C10_HOST_DEVICE inline Box<T> pool_box(const T* roi, int64_t batch, T spatial_scale, int64_t pooled_h,
                                       int64_t pooled_w) {
  Box<T> b;
  b.batch = batch_index(roi[0], batch);
  if (!finite_box(roi[1], roi[2], roi[3], roi[4], spatial_scale)) {
    b.batch = -1;
    b.y = b.x = Axis<T>{T(0), T(1), 0, 0};
    return b;
  }
  b.y = pool_axis(roi[2], roi[4], spatial_scale, pooled_h);
  b.x = pool_axis(roi[1], roi[3], spatial_scale, pooled_w);
  return b;
}

// ps_roi_align: coordinate of sample i of bin p.
template <typename T>
C10_HOST_DEVICE inline T sample_coord(const Axis<T>& a, int64_t p, int i) {
  return roi_bilinear::sample_coord(a.start, a.bin, p, i, a.grid);
}

// ps_roi_pool: pixels [begin, end) of bin p, clamped into [0, size - 1].
struct Range {
  int64_t begin, end;
  C10_HOST_DEVICE bool empty() const { return end <= begin; }
};

template <typename T>
C10_HOST_DEVICE inline Range pool_range(const Axis<T>& a, int64_t p, int64_t size) {
  int64_t b = static_cast<int64_t>(floor_of(static_cast<T>(p) * a.bin)) + a.start_px;
  int64_t e = static_cast<int64_t>(ceil_of(static_cast<T>(p + 1) * a.bin)) + a.start_px;
  const int64_t last = size - 1;
  b = b < 0 ? 0 : (b > last ? last : b);
  e = e < 0 ? 0 : (e > last ? last : e);
  return {b, e};
}

// The gather backward (CUDA) works per pixel: a bin's weight on a pixel is
// separable, weight(y, x) = axis_weight(y) * axis_weight(x) * scale.

// ps_roi_align: pixels [lo, hi] that the taps of bin p may touch (a superset),
// clamped into the map; hi < lo when none.
template <typename T>
C10_HOST_DEVICE inline Range align_span(const Axis<T>& a, int64_t p, int64_t size) {
  if (a.grid <= 0 || size <= 0) {
    return {0, 0};
  }
  const T s0 = a.start + static_cast<T>(p) * a.bin, s1 = s0 + a.bin;
  T lo = (s0 < s1 ? s0 : s1) - T(1), hi = (s0 < s1 ? s1 : s0) + T(1);
  const T top = static_cast<T>(size - 1);
  lo = lo < T(0) ? T(0) : (lo > top ? top : lo);
  hi = hi < T(0) ? T(0) : (hi > top ? top : hi);
  if (!(lo <= hi)) {
    return {0, 0};
  }
  return {static_cast<int64_t>(floor_of(lo)), static_cast<int64_t>(ceil_of(hi)) + 1};
}

// ps_roi_align: the sum, over the samples of bin p, of their tap weight on `pixel`.
template <typename T>
C10_HOST_DEVICE inline T align_axis_weight(const Axis<T>& a, int64_t p, int64_t size, int64_t pixel) {
  T w = T(0);
  for (int i = 0; i < a.grid; ++i) {
    const roi_bilinear::AxisTap<T> t = roi_bilinear::axis_tap(sample_coord(a, p, i), size);
    if (t.valid) {
      w += (t.lo == pixel ? t.w_lo : T(0)) + (t.hi == pixel ? t.w_hi : T(0));
    }
  }
  return w;
}

} // namespace ps_roi_math
} // namespace mmops
