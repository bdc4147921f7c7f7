#pragma once
// Convex-polygon geometry shared by the rotated and quadrilateral box ops
// (box_iou_rotated, box_iou_quadri, nms_rotated, nms_quadri, convex_iou, the
// BEV overlaps of the 3D ops) on CPU and CUDA. T is the compute type: float
// for float/half/bfloat16 inputs, double for double.
//
// Intersection of two convex polygons: Sutherland-Hodgman clipping of one by
// each edge of the other, then the shoelace area. Choices that keep the usual
// failure cases right:
//   * a vertex on a clip edge (cross product exactly 0) is kept, and an edge is
//     cut only where its end points lie strictly on opposite sides, at
//     t = d_p / (d_p - d_q): the denominator never vanishes and t is in [0, 1],
//     so near-parallel edges cannot blow up;
//   * identical polygons clip to themselves, vertex for vertex, so the
//     intersection area equals each polygon's area bit for bit (IoU exactly 1)
//     when the areas are computed with polygon_area on the same vertices;
//   * callers move the origin next to the polygons (local_origin) before
//     computing corners: boxes of size 1 at coordinates 1e4 then keep their
//     float precision;
//   * degenerate polygons (zero width, repeated vertices) have area 0 and
//     intersect everything with area 0.

#include <c10/macros/Macros.h>

#include "host_device_math.h"

namespace mmops {
namespace polygon {

template <typename T>
struct Point {
  T x, y;
};

// A polygon of at most Max vertices, counter-clockwise (positive area) in a
// frame with y up.
template <typename T, int Max>
struct Polygon {
  Point<T> v[Max];
  int n = 0;
  C10_HOST_DEVICE inline void push(const Point<T>& p) {
    // A convex polygon clipped by k half-planes gains at most k vertices, so
    // callers size Max for that; the guard only matters for non-convex input.
    if (n < Max) {
      v[n++] = p;
    }
  }
};

// (a - o) x (b - o): positive when o -> a -> b turns left.
template <typename T>
C10_HOST_DEVICE inline T cross(const Point<T>& o, const Point<T>& a, const Point<T>& b) {
  // Each product rounded on its own (no FMA on the GPU): a vertex that lies
  // on an edge then gives exactly 0 on every device.
  return host_device_math::mul_rn(a.x - o.x, b.y - o.y) - host_device_math::mul_rn(a.y - o.y, b.x - o.x);
}

// Signed area (positive for counter-clockwise), summed as a fan from the first
// vertex so that large coordinates do not cancel.
template <typename T, int Max>
C10_HOST_DEVICE inline T signed_area(const Polygon<T, Max>& p) {
  T twice = T(0);
  for (int i = 1; i + 1 < p.n; ++i) {
    twice += cross(p.v[0], p.v[i], p.v[i + 1]);
  }
  return twice / T(2);
}

// Reverses a clockwise polygon so that the clipping below sees it
// counter-clockwise.
template <typename T, int Max>
C10_HOST_DEVICE inline void make_counter_clockwise(Polygon<T, Max>& p) {
  if (signed_area(p) < T(0)) {
    for (int i = 0, j = p.n - 1; i < j; ++i, --j) {
      const Point<T> t = p.v[i];
      p.v[i] = p.v[j];
      p.v[j] = t;
    }
  }
}

// The part of `in` on the left of (or on) the directed line a -> b.
template <typename T, int Max>
C10_HOST_DEVICE inline void clip_by_edge(const Polygon<T, Max>& in, const Point<T>& a, const Point<T>& b,
                                         Polygon<T, Max>& out) {
  out.n = 0;
  for (int i = 0; i < in.n; ++i) {
    const Point<T>& p = in.v[i];
    const Point<T>& q = in.v[i + 1 == in.n ? 0 : i + 1];
    const T dp = cross(a, b, p);
    const T dq = cross(a, b, q);
    if (dp >= T(0)) {
      out.push(p);
    }
    if ((dp > T(0) && dq < T(0)) || (dp < T(0) && dq > T(0))) {
      const T t = dp / (dp - dq);
      // mul_rn: no FMA on the GPU, so a touching pair's zero-area clip stays 0
      // on every device (an FMA'd point gave area 1e-16 > threshold 0).
      out.push(Point<T>{p.x + host_device_math::mul_rn(t, q.x - p.x), p.y + host_device_math::mul_rn(t, q.y - p.y)});
    }
  }
}

// Area of the intersection of two counter-clockwise convex polygons, clamped
// to [0, min(area_a, area_b)] (areas as polygon area of each). MaxOut must be
// at least a.n + b.n.
template <int MaxOut, typename T, int MaxA, int MaxB>
C10_HOST_DEVICE inline T intersection_area(const Polygon<T, MaxA>& a, const Polygon<T, MaxB>& b, T area_a, T area_b) {
  if (!(area_a > T(0)) || !(area_b > T(0)) || a.n < 3 || b.n < 3) {
    return T(0);
  }
  Polygon<T, MaxOut> buffers[2];
  for (int i = 0; i < a.n; ++i) {
    buffers[0].push(a.v[i]);
  }
  int current = 0;
  for (int e = 0; e < b.n && buffers[current].n >= 3; ++e) {
    clip_by_edge(buffers[current], b.v[e], b.v[e + 1 == b.n ? 0 : e + 1], buffers[1 - current]);
    current = 1 - current;
  }
  if (buffers[current].n < 3) {
    return T(0);
  }
  T inter = signed_area(buffers[current]);
  inter = inter > T(0) ? inter : T(0);
  const T smaller = area_a < area_b ? area_a : area_b;
  return inter < smaller ? inter : smaller;
}

// Where to put the origin for two polygons: the midpoint of two reference
// points (a box centre or first vertex each), so that both sets of local
// coordinates are small.
template <typename T>
C10_HOST_DEVICE inline Point<T> local_origin(const Point<T>& a, const Point<T>& b) {
  return Point<T>{a.x / T(2) + b.x / T(2), a.y / T(2) + b.y / T(2)};
}

// The corners of the rotated box (cx, cy, w, h, theta) relative to `origin`,
// counter-clockwise for w, h > 0: theta turns the box's w axis from the x axis
// towards the y axis (callers negate theta for the other convention).
template <typename T>
C10_HOST_DEVICE inline Polygon<T, 4> rotated_box_corners(T cx, T cy, T w, T h, T theta, const Point<T>& origin) {
  const T c = host_device_math::cos_of(theta);
  const T s = host_device_math::sin_of(theta);
  const T x = cx - origin.x;
  const T y = cy - origin.y;
  const T ux = c * w / T(2), uy = s * w / T(2);  // half the w axis
  const T vx = -s * h / T(2), vy = c * h / T(2); // half the h axis
  Polygon<T, 4> p;
  p.push(Point<T>{x - ux - vx, y - uy - vy});
  p.push(Point<T>{x + ux - vx, y + uy - vy});
  p.push(Point<T>{x + ux + vx, y + uy + vy});
  p.push(Point<T>{x - ux + vx, y - uy + vy});
  return p;
}

// Overlap from an intersection area: intersection over union (iou) or over
// the first polygon's area (iof); 0 when the base is not positive (both
// polygons degenerate) or not finite.
template <typename T>
C10_HOST_DEVICE inline T overlap_from_areas(T inter, T area_a, T area_b, bool iof) {
  const T base = iof ? area_a : area_a + area_b - inter;
  const T value = inter / base;
  return base > T(0) && host_device_math::is_finite(value) ? value : T(0);
}

// The intersection area of two rotated boxes and the area of each.
template <typename T>
struct PairAreas {
  T inter, area_a, area_b;
};

// Areas of two rotated boxes (cx, cy, w, h, theta) and of their intersection.
// A box with a non-finite parameter, or with w <= 0 or h <= 0, overlaps
// nothing: all three are 0.
template <typename T>
C10_HOST_DEVICE inline PairAreas<T> rotated_box_areas(const T* a, const T* b) {
  for (int i = 0; i < 5; ++i) {
    if (!host_device_math::is_finite(a[i]) || !host_device_math::is_finite(b[i])) {
      return PairAreas<T>{T(0), T(0), T(0)};
    }
  }
  if (!(a[2] > T(0) && a[3] > T(0) && b[2] > T(0) && b[3] > T(0))) {
    return PairAreas<T>{T(0), T(0), T(0)};
  }
  const Point<T> origin = local_origin(Point<T>{a[0], a[1]}, Point<T>{b[0], b[1]});
  const Polygon<T, 4> pa = rotated_box_corners(a[0], a[1], a[2], a[3], a[4], origin);
  const Polygon<T, 4> pb = rotated_box_corners(b[0], b[1], b[2], b[3], b[4], origin);
  const T area_a = signed_area(pa);
  const T area_b = signed_area(pb);
  return PairAreas<T>{intersection_area<8>(pa, pb, area_a, area_b), area_a, area_b};
}

// Overlap of two rotated boxes (cx, cy, w, h, theta). A box with a non-finite
// parameter overlaps nothing (0); so does a box with w <= 0 or h <= 0.
template <typename T>
C10_HOST_DEVICE inline T rotated_box_overlap(const T* a, const T* b, bool iof) {
  const PairAreas<T> r = rotated_box_areas(a, b);
  return overlap_from_areas(r.inter, r.area_a, r.area_b, iof);
}

// Overlap of two quadrilaterals (x1, y1, ..., x4, y4), each convex in either
// orientation. A quadrilateral with a non-finite coordinate overlaps nothing.
template <typename T>
C10_HOST_DEVICE inline T quadri_overlap(const T* a, const T* b, bool iof) {
  for (int i = 0; i < 8; ++i) {
    if (!host_device_math::is_finite(a[i]) || !host_device_math::is_finite(b[i])) {
      return T(0);
    }
  }
  const Point<T> origin = local_origin(Point<T>{a[0], a[1]}, Point<T>{b[0], b[1]});
  Polygon<T, 4> pa, pb;
  for (int i = 0; i < 4; ++i) {
    pa.push(Point<T>{a[2 * i] - origin.x, a[2 * i + 1] - origin.y});
    pb.push(Point<T>{b[2 * i] - origin.x, b[2 * i + 1] - origin.y});
  }
  make_counter_clockwise(pa);
  make_counter_clockwise(pb);
  const T area_a = signed_area(pa);
  const T area_b = signed_area(pb);
  const T inter = intersection_area<8>(pa, pb, area_a, area_b);
  return overlap_from_areas(inter, area_a, area_b, iof);
}

} // namespace polygon
} // namespace mmops
