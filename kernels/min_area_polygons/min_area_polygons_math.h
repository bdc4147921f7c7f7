#pragma once
// The minimum-area enclosing rectangle of a 9-point set (CPU and CUDA): the
// convex hull (kernels/common/convex_hull.h), then one candidate rectangle per
// hull edge (rotating calipers: the optimum has a side on a hull edge).
//
// mmcv's conventions: an edge's direction is taken modulo 90 degrees, as the
// unit vector (c, s) with c > 0, s >= 0 (angle in [0, pi/2)); in the frame
// that turns it onto the x axis the rectangle is [xmin, xmax] x [ymin, ymax]
// and its corners come out as (xmax, ymin), (xmin, ymin), (xmin, ymax),
// (xmax, ymax). The first edge (counter-clockwise from the lowest point) with
// the smallest area wins ties. No trigonometry: the direction is the
// normalised edge vector turned by multiples of 90 degrees.
//
// Two hull edges often give the same area to a few ulps (a tie in exact
// arithmetic), so which one wins is decided by rounding: every product is
// rounded on its own (host_device_math::mul_rn, no FMA on the device) so that the
// CUDA kernel rounds exactly as the CPU one and picks the same edge.

#include <c10/macros/Macros.h>

#include "common/convex_hull.h"
#include "common/host_device_math.h"

namespace mmops {
namespace min_area_polygons_math {

using host_device_math::mul_rn;
using polygon::Point;

constexpr int kPoints = 9;

// (c, s): the edge's direction turned into the quadrant c > 0, s >= 0.
template <typename T>
C10_HOST_DEVICE inline Point<T> quadrant_direction(T dx, T dy) {
  const T len = host_device_math::sqrt_of(mul_rn(dx, dx) + mul_rn(dy, dy));
  T c = dx / len, s = dy / len;
  for (int turn = 0; turn < 3 && !(c > T(0) && s >= T(0)); ++turn) {
    const T t = c; // turn by -90 degrees: (c, s) -> (s, -c)
    c = s;
    s = -t;
  }
  return Point<T>{c, s};
}

// Corners (x1, y1, ..., x4, y4) of the minimum-area rectangle around
// pts[0, 9) (coordinates relative to pts[0], added back here). A set with a
// non-finite coordinate gives NaN corners; equal points give that point 4
// times; collinear points a rectangle of height 0.
template <typename T>
C10_HOST_DEVICE inline void min_area_rect(const Point<T>* in, T* out) {
  Point<T> pts[kPoints];
  const Point<T> origin = in[0];
  for (int i = 0; i < kPoints; ++i) {
    if (!host_device_math::is_finite(in[i].x) || !host_device_math::is_finite(in[i].y)) {
      for (int k = 0; k < 8; ++k) {
        out[k] = host_device_math::sqrt_of(T(-1)); // NaN
      }
      return;
    }
    pts[i] = Point<T>{in[i].x - origin.x, in[i].y - origin.y};
  }
  int hull[kPoints];
  const int n = convex_hull::hull_indices<kPoints>(pts, kPoints, hull);
  convex_hull::start_at_lowest(pts, hull, n);
  Point<T> dir{T(1), T(0)};
  T box[4] = {T(0), T(0), T(0), T(0)}; // xmin, ymin, xmax, ymax in the rotated frame
  bool found = false;
  T best = T(0);
  for (int e = 0; e < n && n >= 2; ++e) {
    const Point<T>& a = pts[hull[e]];
    const Point<T>& b = pts[hull[e + 1 == n ? 0 : e + 1]];
    const Point<T> d = quadrant_direction(b.x - a.x, b.y - a.y);
    T lo_x = T(0), lo_y = T(0), hi_x = T(0), hi_y = T(0);
    for (int i = 0; i < n; ++i) {
      const Point<T>& p = pts[hull[i]];
      const T x = mul_rn(d.x, p.x) + mul_rn(d.y, p.y); // rotated by -angle
      const T y = mul_rn(d.x, p.y) - mul_rn(d.y, p.x);
      lo_x = (i == 0 || x < lo_x) ? x : lo_x;
      hi_x = (i == 0 || x > hi_x) ? x : hi_x;
      lo_y = (i == 0 || y < lo_y) ? y : lo_y;
      hi_y = (i == 0 || y > hi_y) ? y : hi_y;
    }
    const T area = mul_rn(hi_x - lo_x, hi_y - lo_y);
    if (!found || area < best) {
      found = true;
      best = area;
      dir = d;
      box[0] = lo_x, box[1] = lo_y, box[2] = hi_x, box[3] = hi_y;
    }
  }
  const T xs[4] = {box[2], box[0], box[0], box[2]};
  const T ys[4] = {box[1], box[1], box[3], box[3]};
  for (int k = 0; k < 4; ++k) { // rotate back by +angle
    out[2 * k] = mul_rn(dir.x, xs[k]) - mul_rn(dir.y, ys[k]) + origin.x;
    out[2 * k + 1] = mul_rn(dir.y, xs[k]) + mul_rn(dir.x, ys[k]) + origin.y;
  }
}

} // namespace min_area_polygons_math
} // namespace mmops
