#pragma once
// BorderAlign (BorderDet, mmcv's border_align) math shared by the CPU and CUDA
// kernels.
//
// input [N, 4C, H, W]: channels [0, C) belong to the top border, [C, 2C) to the
// left, [2C, 3C) to the bottom and [3C, 4C) to the right one. boxes [N, H * W, 4]
// (x1, y1, x2, y2), one box per pixel. output [N, C, H * W, 4]: for box k and
// border b (0 top, 1 left, 2 bottom, 3 right), channel c, the maximum over
// pool_size + 1 points walked along the border, bilinearly sampled from input
// channel b * C + c:
//   top:    from (x1, y1), step (+w / pool_size, 0)
//   left:   from (x1, y1), step (0, +h / pool_size)
//   bottom: from (x2, y2), step (-w / pool_size, 0)
//   right:  from (x2, y2), step (0, -h / pool_size)
// with w = x2 - x1, h = y2 - y1. As mmcv, point i is reached by adding the step
// i times (not start + i * step): the positions are bitwise mmcv's forward
// positions in float32 / float64, and the backward replays the same additions,
// so the gradient goes exactly to the sample that won.
// Sampling is mmcv's border-clamped bilinear rule (common/roi_bilinear.h): a
// point outside [-1, size] on an axis (or NaN) is worth 0, and that 0 takes part
// in the maximum. The maximum keeps the first winner of a tie (the point walked
// first), and a NaN wins and sticks (host_device_math::MaxTracker; mmcv keeps a
// NaN only at the start point). argmax_idx holds the winning point i in [0, pool_size].
// The sample value rounds every product once (mul_rn) and adds in a fixed
// order: CPU and CUDA give bitwise the same outputs and argmax from the same inputs.

#include <c10/macros/Macros.h>

#include "common/fixed_point.h"
#include "common/host_device_math.h"
#include "common/roi_bilinear.h"

#include <cmath>
#include <cstdint>

namespace mmops {

struct BorderAlignParams {
  int64_t batch;     // N
  int64_t channels;  // C (input has 4C channels)
  int64_t height;    // H
  int64_t width;     // W
  int64_t boxes;     // H * W boxes per image
  int64_t pool_size; // pool_size + 1 points per border
};

namespace border_align_math {

using host_device_math::MaxTracker;
using host_device_math::mul_rn;

constexpr int kBorders = 4;
// pool_size's upper bound (the work per output is pool_size + 1 samples).
constexpr int64_t kMaxPoolSize = int64_t(1) << 16;
// H and W's upper bound: coordinates up to the size convert to int exactly.
constexpr int64_t kMaxSide = int64_t(1) << 30;

// The walk along one border: the current point (x, y) and the step.
template <typename T>
struct Walk {
  T x, y, dx, dy;
};

// The start of border `border` (0 top, 1 left, 2 bottom, 3 right) of box
// (x1, y1, x2, y2) and its step.
template <typename T>
C10_HOST_DEVICE inline Walk<T> border_walk(T x1, T y1, T x2, T y2, int border, int64_t pool_size) {
  const bool horizontal = border == 0 || border == 2; // top, bottom: along x
  const bool from_first = border < 2;                 // top, left: from (x1, y1)
  const T step = (horizontal ? x2 - x1 : y2 - y1) / static_cast<T>(pool_size);
  const T signed_step = from_first ? step : -step;
  Walk<T> w;
  w.x = from_first ? x1 : x2;
  w.y = from_first ? y1 : y2;
  w.dx = horizontal ? signed_step : T(0);
  w.dy = horizontal ? T(0) : signed_step;
  return w;
}

template <typename T>
C10_HOST_DEVICE inline void advance(Walk<T>& w) {
  w.x += w.dx;
  w.y += w.dy;
}

// The walk after `steps` steps (the backward's replay of the forward).
template <typename T>
C10_HOST_DEVICE inline Walk<T> walk_to(Walk<T> w, int steps) {
  for (int i = 0; i < steps; ++i) {
    advance(w);
  }
  return w;
}

// The four neighbours of a point and their weights; valid false: the point is worth 0.
template <typename T>
struct Taps {
  roi_bilinear::Corners<T> c;
  bool valid;
};

template <typename T>
C10_HOST_DEVICE inline Taps<T> taps_at(T y, T x, int64_t height, int64_t width) {
  Taps<T> t;
  const roi_bilinear::AxisTap<T> ty = roi_bilinear::axis_tap(y, height);
  const roi_bilinear::AxisTap<T> tx = roi_bilinear::axis_tap(x, width);
  t.valid = ty.valid && tx.valid;
  if (t.valid) {
    t.c = roi_bilinear::corners(ty, tx, width);
  } else {
    for (int j = 0; j < 4; ++j) {
      t.c.offset[j] = 0;
      t.c.weight[j] = T(0);
    }
  }
  return t;
}

// The sample of one H x W plane at the taps: products rounded once, added in order.
template <typename T, typename scalar_t>
C10_HOST_DEVICE inline T blend(const Taps<T>& t, const scalar_t* plane) {
  if (!t.valid) {
    return T(0);
  }
  const T v0 = static_cast<T>(plane[t.c.offset[0]]);
  const T v1 = static_cast<T>(plane[t.c.offset[1]]);
  const T v2 = static_cast<T>(plane[t.c.offset[2]]);
  const T v3 = static_cast<T>(plane[t.c.offset[3]]);
  T v = mul_rn(t.c.weight[0], v0);
  v += mul_rn(t.c.weight[1], v1);
  v += mul_rn(t.c.weight[2], v2);
  v += mul_rn(t.c.weight[3], v3);
  return v;
}

// Deterministic CUDA gradient sums: int64 fixed point (common/fixed_point.h;
// bilinear weights sum to 1, so a pixel receives at most max_abs per output).
using fixed_point::fixed_point_scale;

} // namespace border_align_math
} // namespace mmops
