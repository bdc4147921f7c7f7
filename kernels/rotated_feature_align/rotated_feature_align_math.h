#pragma once
// Sample points of rotated_feature_align, shared by the CPU and CUDA kernels.
//
// mmcv's layout of a pixel's rbox (b0, b1, b2, b3, b4): the centre is sampled
// at row b0 * scale and column b1 * scale; for 5 points the corners follow
// from the width b2 * scale, the height b3 * scale and the angle b4 (radians)
// as mmcv computes them. Each point is sampled with mmcv's border-clamped
// bilinear rule (common/roi_bilinear.h): a point outside [-1, size] on an
// axis, or not finite, contributes 0.

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"
#include "common/roi_bilinear.h"

#include <cstdint>

namespace mmops {
namespace rotated_feature_align_math {

constexpr int kMaxPoints = 5;

// Strides of a feature plane (elements): row and column.
struct PlaneStrides {
  int64_t row, col;
};

// One sample point: four neighbour offsets into a plane and their weights.
template <typename T>
struct Tap4 {
  int64_t offset[4];
  T weight[4];
  bool valid;
};

template <typename T>
struct PixelTaps {
  Tap4<T> tap[kMaxPoints];
  int count;
};

template <typename T>
C10_HOST_DEVICE inline Tap4<T> tap_at(T y, T x, int64_t height, int64_t width, PlaneStrides s) {
  Tap4<T> t{};
  const roi_bilinear::AxisTap<T> ty = roi_bilinear::axis_tap(y, height);
  const roi_bilinear::AxisTap<T> tx = roi_bilinear::axis_tap(x, width);
  t.valid = ty.valid && tx.valid;
  if (!t.valid) {
    return t;
  }
  t.offset[0] = ty.lo * s.row + tx.lo * s.col;
  t.offset[1] = ty.lo * s.row + tx.hi * s.col;
  t.offset[2] = ty.hi * s.row + tx.lo * s.col;
  t.offset[3] = ty.hi * s.row + tx.hi * s.col;
  t.weight[0] = ty.w_lo * tx.w_lo;
  t.weight[1] = ty.w_lo * tx.w_hi;
  t.weight[2] = ty.w_hi * tx.w_lo;
  t.weight[3] = ty.w_hi * tx.w_hi;
  return t;
}

// The taps of one pixel's rbox `box` (5 values, read in the compute type T).
template <typename T>
C10_HOST_DEVICE inline PixelTaps<T> pixel_taps(const T box[5], T scale, int points, int64_t height, int64_t width,
                                               PlaneStrides s) {
  using namespace host_device_math;
  PixelTaps<T> p;
  const T cy = box[0] * scale;
  const T cx = box[1] * scale;
  p.tap[0] = tap_at(cy, cx, height, width, s);
  p.count = 1;
  if (points == kMaxPoints) {
    const T half_w = box[2] * scale / T(2);
    const T half_h = box[3] * scale / T(2);
    const T cosa = cos_of(box[4]);
    const T sina = sin_of(box[4]);
    const T wx = cosa * half_w, wy = sina * half_w;
    const T hx = -sina * half_h, hy = cosa * half_h;
    const T dx[4] = {wx + hx, -wx + hx, -wx - hx, wx - hx};
    const T dy[4] = {wy + hy, -wy + hy, -wy - hy, wy - hy};
    for (int i = 0; i < 4; ++i) {
      p.tap[i + 1] = tap_at(cy + dy[i], cx + dx[i], height, width, s);
    }
    p.count = kMaxPoints;
  }
  return p;
}

// Sum of the samples of one plane (base: the plane's first element).
template <typename T, typename scalar_t>
C10_HOST_DEVICE inline T sample_sum(const PixelTaps<T>& p, const scalar_t* base) {
  T sum = T(0);
  for (int i = 0; i < p.count; ++i) {
    const Tap4<T>& t = p.tap[i];
    if (t.valid) {
      for (int j = 0; j < 4; ++j) {
        sum += t.weight[j] * static_cast<T>(base[t.offset[j]]);
      }
    }
  }
  return sum;
}

} // namespace rotated_feature_align_math
} // namespace mmops
