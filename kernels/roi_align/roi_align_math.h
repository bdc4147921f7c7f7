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
#include "common/roi_bilinear.h"

#include <cmath>
#include <cstdint>

namespace mmops {
namespace roi_align_math {

using host_device_math::batch_index;
using host_device_math::ceil_of;
using host_device_math::is_finite;
using host_device_math::MaxTracker;
// The sampling grid and the border-clamped bilinear taps: common/roi_bilinear.h.
using roi_bilinear::axis_tap;
using roi_bilinear::AxisTap;
using roi_bilinear::Corners;
using roi_bilinear::corners;
using roi_bilinear::kMaxAdaptiveGrid;
using roi_bilinear::kMaxGridSide;
using roi_bilinear::sample_coord;
using roi_bilinear::samples_per_bin;

// One roi in feature-map coordinates.
template <typename T>
struct RoiBox {
  T start_y, start_x; // top-left corner
  T bin_h, bin_w;     // size of one output bin
  int grid_h, grid_w; // samples per bin side; 0 means the bin has no samples
  bool valid;         // false when a coordinate is not finite
};

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

// Running maximum over a bin's samples for pool_mode="max" (index: the sample
// iy * grid_w + ix): host_device_math::MaxTracker.
} // namespace roi_align_math
} // namespace mmops
