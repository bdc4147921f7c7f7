#pragma once
// Math of prroi_pool shared by the CPU and CUDA kernels (no ATen).
//
// The feature map is continuous through bilinear interpolation with zeros
// outside: f(y, x) = sum_ij D[i][j] tent(y - i) tent(x - j), tent(u) =
// max(0, 1 - |u|). A bin [y1, y2] x [x1, x2] pools the mean of f over it:
//   out = sum_ij D[i][j] wy(i) wx(j) / area,  wy(i) = integral_y1^y2 tent(y - i) dy
// (wx likewise), so a bin needs two short weight vectors, one per axis.

#include "common/host_device_math.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace prroi_pool_math {

using host_device_math::ceil_of;
using host_device_math::floor_of;

// integral over [lo, hi] of tent(t - i) dt. tent is linear on [-1, 0] and
// [0, 1], so each piece's integral is its length times tent at its midpoint.
// Unlike a difference of two antiderivative values, this keeps the weight of
// a short interval accurate to rounding (a small bin's weight is divided by
// its small area).
template <typename T>
C10_HOST_DEVICE inline T axis_weight(T lo, T hi, int64_t i) {
  const T c = static_cast<T>(i);
  const T a = lo - c, b = hi - c; // in the tent's own coordinate
  T w = T(0);
  const T l1 = a > T(-1) ? a : T(-1), r1 = b < T(0) ? b : T(0); // rising piece, tent = 1 + t
  if (r1 > l1) {
    w += (r1 - l1) * ((l1 + T(1)) + (r1 + T(1))) * T(0.5);
  }
  const T l2 = a > T(0) ? a : T(0), r2 = b < T(1) ? b : T(1); // falling piece, tent = 1 - t
  if (r2 > l2) {
    w += (r2 - l2) * ((T(1) - l2) + (T(1) - r2)) * T(0.5);
  }
  return w;
}

// The pixels [first, last] of an axis of `size` pixels whose tent (i - 1,
// i + 1) may overlap [lo, hi]: floor(lo) .. ceil(hi), clipped to the map. Empty (first > last)
// when the interval misses the map or is not finite (NaN compares false).
struct PixelRange {
  int64_t first;
  int64_t last;
};

template <typename T>
C10_HOST_DEVICE inline PixelRange pixel_range(T lo, T hi, int64_t size) {
  const T top = static_cast<T>(size - 1);
  if (!(lo < static_cast<T>(size)) || !(hi > T(-1)) || !(lo <= hi)) {
    return {0, -1};
  }
  const T first = lo > T(0) ? floor_of(lo) : T(0);
  const T last = hi < top ? ceil_of(hi) : top;
  return {static_cast<int64_t>(first), static_cast<int64_t>(last)};
}

// One bin of a roi in feature-map coordinates (mmcv's geometry: corners
// scaled, no half-pixel offset, the roi's sides clamped at 0, bins of equal
// size). area == 0: the bin pools 0 and passes no gradient.
template <typename T>
struct PrBin {
  T y1, y2, x1, x2;
  T area;
};

// How a roi pools: its bins' integrals, zeros (no image of that index on
// CUDA, where indices are not validated, or sides <= 0: empty bins), or NaN
// (a coordinate is not finite).
enum class RoiKind { kPools, kZeros, kNaN };

// The image of a roi's batch index (truncated), -1 when outside [0, batch) or NaN.
template <typename T>
C10_HOST_DEVICE inline int64_t roi_image(T index, int64_t batch) {
  return (index >= T(0) && index < static_cast<T>(batch)) ? static_cast<int64_t>(index) : -1;
}

template <typename T>
C10_HOST_DEVICE inline RoiKind roi_kind(int64_t image, int64_t batch, T x1, T y1, T x2, T y2, T spatial_scale) {
  using host_device_math::is_finite;
  if (image < 0 || image >= batch) {
    return RoiKind::kZeros;
  }
  if (!is_finite(x1 * spatial_scale) || !is_finite(y1 * spatial_scale) || !is_finite(x2 * spatial_scale) ||
      !is_finite(y2 * spatial_scale)) {
    return RoiKind::kNaN;
  }
  const T w = x2 * spatial_scale - x1 * spatial_scale, h = y2 * spatial_scale - y1 * spatial_scale;
  return (w > T(0) && h > T(0)) ? RoiKind::kPools : RoiKind::kZeros;
}

// The value of every output of a roi that does not pool (kind != kPools, or
// a bin area that underflows to 0).
template <typename T>
C10_HOST_DEVICE inline T non_pooling_value(RoiKind kind) {
  return kind == RoiKind::kNaN ? T(NAN) : T(0);
}

// roi: (batch, x1, y1, x2, y2) in input coordinates, as acc_t values.
template <typename T>
C10_HOST_DEVICE inline PrBin<T> bin_of(T rx1, T ry1, T rx2, T ry2, int64_t ph, int64_t pw, int64_t pooled_height,
                                       int64_t pooled_width, T spatial_scale) {
  const T x1 = rx1 * spatial_scale, y1 = ry1 * spatial_scale;
  const T width = rx2 * spatial_scale - x1, height = ry2 * spatial_scale - y1;
  const T bin_w = (width > T(0) ? width : T(0)) / static_cast<T>(pooled_width);
  const T bin_h = (height > T(0) ? height : T(0)) / static_cast<T>(pooled_height);
  PrBin<T> b;
  b.x1 = x1 + bin_w * static_cast<T>(pw);
  b.y1 = y1 + bin_h * static_cast<T>(ph);
  b.x2 = b.x1 + bin_w;
  b.y2 = b.y1 + bin_h;
  b.area = bin_w * bin_h;
  return b;
}

// The integral of f over the bin: sum_ij D[i][j] wy(i) wx(j), D a plane of
// height x width values (row-major, any element type convertible to T).
template <typename T, typename D>
C10_HOST_DEVICE inline T bin_integral(const D* plane, int64_t height, int64_t width, const PrBin<T>& b) {
  const PixelRange rows = pixel_range(b.y1, b.y2, height);
  const PixelRange cols = pixel_range(b.x1, b.x2, width);
  T sum = T(0);
  for (int64_t i = rows.first; i <= rows.last; ++i) {
    const T wy = axis_weight(b.y1, b.y2, i);
    const D* row = plane + i * width;
    T row_sum = T(0);
    for (int64_t j = cols.first; j <= cols.last; ++j) {
      row_sum += axis_weight(b.x1, b.x2, j) * static_cast<T>(row[j]);
    }
    sum += wy * row_sum;
  }
  return sum;
}

// f along a line of the map (a row or a column): `count` pixels line[k * step]
// interpolated linearly at t, zero outside.
template <typename T, typename D>
C10_HOST_DEVICE inline T line_value(const D* line, int64_t count, int64_t step, T t) {
  if (!(t > T(-1)) || !(t < static_cast<T>(count))) {
    return T(0);
  }
  const int64_t k = static_cast<int64_t>(floor_of(t));
  const T frac = t - static_cast<T>(k);
  T v = T(0);
  if (k >= 0) {
    v += (T(1) - frac) * static_cast<T>(line[k * step]);
  }
  if (k + 1 < count) {
    v += frac * static_cast<T>(line[(k + 1) * step]);
  }
  return v;
}

// f along row i at x, and along column j at y (zero outside the map).
template <typename T, typename D>
C10_HOST_DEVICE inline T row_value(const D* plane, int64_t height, int64_t width, int64_t i, T x) {
  return (i < 0 || i >= height) ? T(0) : line_value(plane + i * width, width, int64_t(1), x);
}

template <typename T, typename D>
C10_HOST_DEVICE inline T column_value(const D* plane, int64_t height, int64_t width, int64_t j, T y) {
  return (j < 0 || j >= width) ? T(0) : line_value(plane + j, height, width, y);
}

// d out / d (x1, y1, x2, y2) of the roi (input coordinates) for one output
// out = I / area: moving the bin's left edge bx1 changes I by -integral of
// f(y, bx1) over [by1, by2], and area by -(by2 - by1); bx1 and bx2 are affine
// in the roi's x1, x2 (bx1 = x1 + (x2 - x1) pw / PW).
template <typename T>
struct RoiCoordGrad {
  T x1, y1, x2, y2;
};

template <typename T, typename D>
C10_HOST_DEVICE inline RoiCoordGrad<T> roi_coord_grad(const D* plane, int64_t height, int64_t width, const PrBin<T>& b,
                                                      int64_t ph, int64_t pw, int64_t pooled_height,
                                                      int64_t pooled_width, T spatial_scale) {
  RoiCoordGrad<T> g{T(0), T(0), T(0), T(0)};
  if (!(b.area > T(0))) {
    return g;
  }
  const T out = bin_integral(plane, height, width, b) / b.area;
  const PixelRange rows = pixel_range(b.y1, b.y2, height);
  const PixelRange cols = pixel_range(b.x1, b.x2, width);
  T left = T(0), right = T(0), top = T(0), bottom = T(0); // edge integrals of f
  for (int64_t i = rows.first; i <= rows.last; ++i) {
    const T wy = axis_weight(b.y1, b.y2, i);
    left += wy * row_value(plane, height, width, i, b.x1);
    right += wy * row_value(plane, height, width, i, b.x2);
  }
  for (int64_t j = cols.first; j <= cols.last; ++j) {
    const T wx = axis_weight(b.x1, b.x2, j);
    top += wx * column_value(plane, height, width, j, b.y1);
    bottom += wx * column_value(plane, height, width, j, b.y2);
  }
  const T bin_h = b.y2 - b.y1, bin_w = b.x2 - b.x1;
  const T d_bx1 = (out * bin_h - left) / b.area, d_bx2 = (right - out * bin_h) / b.area;
  const T d_by1 = (out * bin_w - top) / b.area, d_by2 = (bottom - out * bin_w) / b.area;
  // the bin's edges as fractions of the roi: bx1 = x1 (1 - s) + x2 s with s = pw / PW
  const T sx1 = static_cast<T>(pw) / static_cast<T>(pooled_width);
  const T sx2 = static_cast<T>(pw + 1) / static_cast<T>(pooled_width);
  const T sy1 = static_cast<T>(ph) / static_cast<T>(pooled_height);
  const T sy2 = static_cast<T>(ph + 1) / static_cast<T>(pooled_height);
  g.x1 = (d_bx1 * (T(1) - sx1) + d_bx2 * (T(1) - sx2)) * spatial_scale;
  g.x2 = (d_bx1 * sx1 + d_bx2 * sx2) * spatial_scale;
  g.y1 = (d_by1 * (T(1) - sy1) + d_by2 * (T(1) - sy2)) * spatial_scale;
  g.y2 = (d_by1 * sy1 + d_by2 * sy2) * spatial_scale;
  return g;
}

} // namespace prroi_pool_math
} // namespace mmops
