#pragma once
// Pair overlap of rotated boxes / quadrilaterals shared by box_iou_rotated and
// nms_rotated, CPU and CUDA: a box loaded in the compute type, a cheap
// disjointness test, then polygon.h's exact clip.

#include "host_device_math.h"
#include "polygon.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace rotated_iou {

// A rotated box (5 values) or a quadrilateral (8), plus a bounding circle.
template <typename T, int D>
struct Shape {
  T v[D];
  T cx, cy, r2; // bounding circle: centre and squared radius (NaN for non-finite input)
};

template <typename scalar_t, typename T, int D>
C10_HOST_DEVICE inline Shape<T, D> load_shape(const scalar_t* __restrict__ row, bool clockwise) {
  Shape<T, D> s;
  for (int k = 0; k < D; ++k) {
    s.v[k] = static_cast<T>(row[k]);
  }
  if constexpr (D == 5) {
    if (!clockwise) {
      s.v[4] = -s.v[4];
    }
    s.cx = s.v[0];
    s.cy = s.v[1];
    s.r2 = (s.v[2] * s.v[2] + s.v[3] * s.v[3]) / T(4);
  } else {
    // The centroid of the corners and the farthest corner from it.
    T sx = T(0), sy = T(0);
    for (int k = 0; k < 4; ++k) {
      sx += s.v[2 * k];
      sy += s.v[2 * k + 1];
    }
    s.cx = sx / T(4);
    s.cy = sy / T(4);
    T r2 = T(0);
    for (int k = 0; k < 4; ++k) {
      const T dx = s.v[2 * k] - s.cx, dy = s.v[2 * k + 1] - s.cy;
      const T d2 = dx * dx + dy * dy;
      r2 = (d2 > r2 || d2 != d2) ? d2 : r2;
    }
    s.r2 = r2;
  }
  return s;
}

// True only when the bounding circles are clearly apart (then the exact
// intersection is empty and the overlap is 0). The 1e-3 relative margin
// covers rounding in the test; NaN compares false: the full path decides.
template <typename T, int D>
C10_HOST_DEVICE inline bool surely_disjoint(const Shape<T, D>& a, const Shape<T, D>& b) {
  const T dx = a.cx - b.cx, dy = a.cy - b.cy;
  const T d2 = dx * dx + dy * dy;
  // (ra + rb)^2 <= 2 (ra^2 + rb^2): no square roots.
  return d2 > T(2.002) * (a.r2 + b.r2);
}

template <typename T, int D>
C10_HOST_DEVICE inline T overlap(const Shape<T, D>& a, const Shape<T, D>& b, bool iof) {
  if (surely_disjoint(a, b)) {
    return T(0);
  }
  if constexpr (D == 5) {
    return polygon::rotated_box_overlap<T>(a.v, b.v, iof);
  } else {
    return polygon::quadri_overlap<T>(a.v, b.v, iof);
  }
}

} // namespace rotated_iou
} // namespace mmops
