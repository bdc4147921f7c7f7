#pragma once
// Geometry of rotated RoIAlign bins, shared by the CPU and CUDA kernels of
// roi_align_rotated and riroi_align_rotated (mmcv's rules):
//  * roi = (batch_index, cx, cy, w, h, theta) in image coordinates; the centre
//    and sides are scaled by spatial_scale, the centre shifted by -0.5 when
//    aligned; clamp_size forces w, h >= 1 (unaligned roi_align_rotated and
//    always riroi_align_rotated);
//  * a bin's samples sit on a regular sub-grid of the unrotated box around
//    the centre, then rotate by theta (counterclockwise in image axes; negated
//    when clockwise) and are sampled with mmcv's border-clamped bilinear rule
//    (common/roi_bilinear.h); a bin averages its grid_h x grid_w samples;
//  * riroi_align_rotated also shifts the orientation channels of each group
//    cyclically by floor(theta * O / 2pi) and blends the two nearest ones.
// Defined extras: a roi with a non-finite value or a batch index outside
// [0, N) pools zeros and gets no gradient; the adaptive grid is capped at
// kMaxAdaptiveGrid samples per side (as roi_align).

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"
#include "common/roi_bilinear.h"

#include <cstdint>

namespace mmops {

// Plain data, passed by value to the CUDA kernels.
struct RotatedRoiParams {
  int64_t pooled_height;
  int64_t pooled_width;
  double spatial_scale;
  int64_t sampling_ratio;   // 0: adaptive, ceil(side / pooled side)
  bool aligned;             // centre shifted by -0.5
  bool clamp_size;          // sides at least 1
  bool clockwise;           // theta negated for the rotation
  int64_t num_orientations; // riroi: orientation channels per group; 1 and !rotate_channels: none
  bool rotate_channels;     // riroi's cyclic channel shift
};

namespace rotated_roi {

using roi_bilinear::axis_tap;
using roi_bilinear::AxisTap;
using roi_bilinear::Corners;
using roi_bilinear::corners;
using roi_bilinear::samples_per_bin;

// One roi, ready to place samples.
template <typename T>
struct Roi {
  int64_t batch; // -1: pools zeros
  T center_x, center_y, cos_t, sin_t;
  T start_w, start_h; // -w / 2, -h / 2: bins start here, relative to the centre
  T bin_w, bin_h;
  int grid_w, grid_h;
  T inv_count;   // 1 / (grid_h * grid_w), 0 without samples
  int64_t shift; // riroi: orientation shift in [0, O)
  T w_lo, w_hi;  // riroi: weights of orientation (o - shift) and the next one
};

// Non-negative remainder (C++ % keeps the dividend's sign).
C10_HOST_DEVICE inline int64_t wrap(int64_t v, int64_t n) {
  const int64_t r = v % n;
  return r < 0 ? r + n : r;
}

template <typename T>
C10_HOST_DEVICE inline Roi<T> make_roi(const T* roi, int64_t batch_size, const RotatedRoiParams& p) {
  using namespace host_device_math;
  Roi<T> r{};
  const T scale = static_cast<T>(p.spatial_scale);
  const T offset = p.aligned ? T(0.5) : T(0);
  r.center_x = roi[1] * scale - offset;
  r.center_y = roi[2] * scale - offset;
  T w = roi[3] * scale, h = roi[4] * scale;
  T theta = roi[5];
  const bool finite =
      is_finite(r.center_x) && is_finite(r.center_y) && is_finite(w) && is_finite(h) && is_finite(theta);
  r.batch = finite ? host_device_math::batch_index(roi[0], batch_size) : -1;
  if (r.batch < 0) {
    return r; // grid 0, inv_count 0
  }
  if (p.clamp_size) {
    w = w > T(1) ? w : T(1);
    h = h > T(1) ? h : T(1);
  }
  if (p.rotate_channels) {
    // the shift uses theta before the clockwise flip, as mmcv does
    const T position = theta * static_cast<T>(p.num_orientations) / static_cast<T>(2 * 3.14159265358979323846);
    const T lower = floor_of(position);
    r.w_hi = position - lower;
    r.w_lo = T(1) - r.w_hi;
    // fold into [0, O) in T first: floor(position) may not fit an integer
    const T o_count = static_cast<T>(p.num_orientations);
    T folded = lower - floor_of(lower / o_count) * o_count;
    folded = folded >= T(0) && folded < o_count ? folded : T(0); // rounding at huge |theta|
    r.shift = wrap(static_cast<int64_t>(folded), p.num_orientations);
  } else {
    r.w_lo = T(1);
    r.w_hi = T(0);
    r.shift = 0;
  }
  if (p.clockwise) {
    theta = -theta;
  }
  r.cos_t = cos_of(theta);
  r.sin_t = sin_of(theta);
  r.start_w = -w / T(2);
  r.start_h = -h / T(2);
  r.bin_w = w / static_cast<T>(p.pooled_width);
  r.bin_h = h / static_cast<T>(p.pooled_height);
  r.grid_h = samples_per_bin(h, p.pooled_height, p.sampling_ratio);
  r.grid_w = samples_per_bin(w, p.pooled_width, p.sampling_ratio);
  r.inv_count = r.grid_h * r.grid_w > 0 ? T(1) / static_cast<T>(r.grid_h * r.grid_w) : T(0);
  return r;
}

// The two source channels of output channel `co` and their weights: co itself
// for roi_align_rotated; riroi: channel g * O + o reads (o - shift) mod O and
// the next orientation of its group g.
struct SourceChannels {
  int64_t lo, hi;
};

template <typename T>
C10_HOST_DEVICE inline SourceChannels source_channels(int64_t co, const Roi<T>& r, const RotatedRoiParams& p) {
  if (!p.rotate_channels) {
    return {co, co};
  }
  const int64_t o_count = p.num_orientations;
  const int64_t group = co / o_count, o = co - group * o_count;
  const int64_t rot = wrap(o - r.shift, o_count);
  const int64_t next = rot + 1 == o_count ? 0 : rot + 1;
  return {group * o_count + rot, group * o_count + next};
}

// The inverse: the output channels whose lo / hi source is input channel `ci`
// (the backward gathers an input channel's gradient from them, so each input
// channel has one writer).
template <typename T>
C10_HOST_DEVICE inline SourceChannels output_channels(int64_t ci, const Roi<T>& r, const RotatedRoiParams& p) {
  if (!p.rotate_channels) {
    return {ci, ci};
  }
  const int64_t o_count = p.num_orientations;
  const int64_t group = ci / o_count, o = ci - group * o_count;
  return {group * o_count + wrap(o + r.shift, o_count), group * o_count + wrap(o - 1 + r.shift, o_count)};
}

// The bilinear taps of sample (iy, ix) of bin (ph, pw): offsets into a
// row-major H x W plane, all weights 0 when the sample is worth 0.
template <typename T>
C10_HOST_DEVICE inline Corners<T> sample_taps(const Roi<T>& r, int64_t ph, int64_t pw, int iy, int ix, int64_t height,
                                              int64_t width) {
  const T yy =
      r.start_h + static_cast<T>(ph) * r.bin_h + (static_cast<T>(iy) + T(0.5)) * r.bin_h / static_cast<T>(r.grid_h);
  const T xx =
      r.start_w + static_cast<T>(pw) * r.bin_w + (static_cast<T>(ix) + T(0.5)) * r.bin_w / static_cast<T>(r.grid_w);
  const T y = yy * r.cos_t - xx * r.sin_t + r.center_y;
  const T x = yy * r.sin_t + xx * r.cos_t + r.center_x;
  const AxisTap<T> ty = axis_tap(y, height);
  const AxisTap<T> tx = axis_tap(x, width);
  Corners<T> c = corners(ty, tx, width);
  if (!(ty.valid && tx.valid)) {
    for (int j = 0; j < 4; ++j) {
      c.offset[j] = 0;
      c.weight[j] = T(0);
    }
  }
  return c;
}

} // namespace rotated_roi
} // namespace mmops
