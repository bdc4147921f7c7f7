#pragma once
// BezierAlign (ABCNet, mmcv's bezier_align) geometry, shared by the CPU and
// CUDA kernels. Pure arithmetic on an accumulation type T (float or double).
//
// A roi is 17 values: the batch index, then 8 control points (x, y): columns
// 1..8 the top cubic Bezier curve from its left end (p0) to its right end (p3),
// columns 9..16 the bottom curve from its right end to its left end (the
// polygon order of ABCNet's labels). Points are scaled by spatial_scale.
// Output bin (ph, pw) of a PH x PW grid is centred at
//   c = top(u) * (1 - v) + bottom(u) * v - offset,   u = pw / PW, v = ph / PH
// (as mmcv: u and v are the bin's lower edge in parameter space, not its
// middle), offset = 0.5 when aligned. The bin is an axis-aligned rectangle
// bin_h x bin_w around c, with roi_w = max(|top.x0 - top.x3|, |bottom.x0 -
// bottom.x3|) and roi_h = max(|top.y0 - top.y3|, |bottom.y0 - bottom.y3|): the
// vertical distance between each curve's ends, not between the curves (mmcv's
// and AdelaiDet's rule: a horizontal text line has roi_h = 0); each clamped to
// >= 1 when not aligned; bin_w = roi_w / PW, bin_h = roi_h / PH. It averages grid_h x grid_w samples
// at the centres of a regular sub-grid (sampling_ratio > 0 fixes the grid,
// otherwise ceil(bin size), capped at roi_bilinear::kMaxAdaptiveGrid), sampled
// with mmcv's border-clamped bilinear rule (common/roi_bilinear.h): a sample
// outside [-1, size] on an axis counts as 0 but still counts in the average.
// Defined extras: a roi with a non-finite control point (or a non-finite size)
// pools zeros and gets no gradient; a sample at a non-finite coordinate (an
// overflowing curve) is worth 0; an empty map makes every sample worth 0.

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"
#include "common/roi_bilinear.h"

#include <cstdint>

namespace mmops {

// Plain data, passed by value to the CUDA kernels.
struct BezierAlignParams {
  int64_t pooled_height;  // PH
  int64_t pooled_width;   // PW
  int64_t sampling_ratio; // > 0: samples per bin side; <= 0: adaptive
  double spatial_scale;
  bool aligned;
};

namespace bezier_align_math {

using host_device_math::batch_index;
using host_device_math::is_finite;
using roi_bilinear::axis_tap;
using roi_bilinear::AxisTap;
using roi_bilinear::Corners;
using roi_bilinear::corners;
using roi_bilinear::kMaxGridSide;
using roi_bilinear::samples_per_bin;

// Values of a roi row: batch index + 8 control points.
constexpr int kRoiColumns = 17;

template <typename T>
C10_HOST_DEVICE inline T cubic_bezier(T p0, T p1, T p2, T p3, T u) {
  const T s = T(1) - u;
  return s * s * s * p0 + T(3) * u * s * s * p1 + T(3) * u * u * s * p2 + u * u * u * p3;
}

template <typename T>
C10_HOST_DEVICE inline T larger_of(T a, T b) {
  return a > b ? a : b;
}

// One roi in feature-map coordinates.
template <typename T>
struct BezierRoi {
  T top_x[4], top_y[4];       // top curve, from its left end
  T bottom_x[4], bottom_y[4]; // bottom curve, from its left end
  T offset;                   // 0.5 when aligned
  T bin_h, bin_w;             // size of one output bin
  int grid_h, grid_w;         // samples per bin side; 0: the roi pools zeros
  bool valid;                 // false when a control point or the size is not finite
};

// roi: the 17 values of one row (any element type).
template <typename T, typename scalar_t>
C10_HOST_DEVICE inline BezierRoi<T> make_bezier_roi(const scalar_t* roi, T spatial_scale, bool aligned,
                                                    int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio) {
  BezierRoi<T> r;
  r.valid = true;
  for (int i = 0; i < 4; ++i) {
    r.top_x[i] = static_cast<T>(roi[1 + 2 * i]) * spatial_scale;
    r.top_y[i] = static_cast<T>(roi[2 + 2 * i]) * spatial_scale;
    r.bottom_x[i] = static_cast<T>(roi[15 - 2 * i]) * spatial_scale; // stored right to left
    r.bottom_y[i] = static_cast<T>(roi[16 - 2 * i]) * spatial_scale;
    r.valid = r.valid && is_finite(r.top_x[i]) && is_finite(r.top_y[i]) && is_finite(r.bottom_x[i]) &&
              is_finite(r.bottom_y[i]);
  }
  const T dx_top = r.top_x[0] - r.top_x[3], dx_bottom = r.bottom_x[0] - r.bottom_x[3];
  const T dy_top = r.top_y[0] - r.top_y[3], dy_bottom = r.bottom_y[0] - r.bottom_y[3];
  T roi_w = larger_of(dx_top < T(0) ? -dx_top : dx_top, dx_bottom < T(0) ? -dx_bottom : dx_bottom);
  T roi_h = larger_of(dy_top < T(0) ? -dy_top : dy_top, dy_bottom < T(0) ? -dy_bottom : dy_bottom);
  r.valid = r.valid && is_finite(roi_w) && is_finite(roi_h); // decided before the clamp (NaN would become 1)
  if (!aligned) {
    roi_w = larger_of(roi_w, T(1));
    roi_h = larger_of(roi_h, T(1));
  }
  r.offset = aligned ? T(0.5) : T(0);
  r.bin_h = roi_h / static_cast<T>(pooled_h);
  r.bin_w = roi_w / static_cast<T>(pooled_w);
  r.grid_h = r.valid ? samples_per_bin(roi_h, pooled_h, sampling_ratio) : 0;
  r.grid_w = r.valid ? samples_per_bin(roi_w, pooled_w, sampling_ratio) : 0;
  return r;
}

template <typename T>
struct BinCenter {
  T y, x;
};

// The centre of bin (ph, pw): on the curves at u = pw / PW, v = ph / PH between them.
template <typename T>
C10_HOST_DEVICE inline BinCenter<T> bin_center(const BezierRoi<T>& r, int64_t ph, int64_t pw, int64_t pooled_h,
                                               int64_t pooled_w) {
  const T u = static_cast<T>(pw) / static_cast<T>(pooled_w);
  const T v = static_cast<T>(ph) / static_cast<T>(pooled_h);
  const T x0 = cubic_bezier(r.top_x[0], r.top_x[1], r.top_x[2], r.top_x[3], u);
  const T y0 = cubic_bezier(r.top_y[0], r.top_y[1], r.top_y[2], r.top_y[3], u);
  const T x1 = cubic_bezier(r.bottom_x[0], r.bottom_x[1], r.bottom_x[2], r.bottom_x[3], u);
  const T y1 = cubic_bezier(r.bottom_y[0], r.bottom_y[1], r.bottom_y[2], r.bottom_y[3], u);
  BinCenter<T> c;
  c.x = x1 * v + x0 * (T(1) - v) - r.offset;
  c.y = y1 * v + y0 * (T(1) - v) - r.offset;
  return c;
}

// Coordinate of sample i (of grid) of a bin of size `bin` centred at `center`, along one axis.
template <typename T>
C10_HOST_DEVICE inline T sample_coord(T center, T bin, int i, int grid) {
  return center - T(0.5) * bin + (static_cast<T>(i) + T(0.5)) * bin / static_cast<T>(grid);
}

} // namespace bezier_align_math
} // namespace mmops
