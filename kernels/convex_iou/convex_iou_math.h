#pragma once
// convex_iou / convex_giou math (CPU and CUDA): the convex hull of a 9-point
// set (kernels/common/convex_hull.h) against a quadrilateral (either
// orientation), the intersection by kernels/common/polygon.h.
//
// convex_giou also gives d giou / d points in closed form (generic position):
//   giou = I / U - (C - U) / C, U = A + B - I,
// A the hull's area, B the quadrilateral's, I their intersection's, C the
// area of the hull of both. dA and dC are shoelace gradients at the hull's
// vertices; dI moves each hull edge: for edge (P, Q) with outward normal n
// (times its length) and [s0, s1] the part of the edge inside the
// quadrilateral (closed half-planes), dI/dP = n * int (1 - s) ds,
// dI/dQ = n * int s ds over [s0, s1]. Where an edge runs along the
// quadrilateral's boundary that is the derivative for moving inwards.
// Points that are not hull vertices (inside, on an edge, repeated) get 0.

#include <c10/macros/Macros.h>

#include "common/convex_hull.h"
#include "common/host_device_math.h"
#include "common/polygon.h"

namespace mmops {
namespace convex_iou_math {

using polygon::Point;
using polygon::Polygon;

constexpr int kPoints = 9;
constexpr int kClip = 16; // a 9-gon clipped by 4 half-planes: at most 13 vertices

// A point set's hull (absolute coordinates) and its area; area 0 and n 0
// for a set with a non-finite coordinate.
template <typename T>
struct Hull {
  Polygon<T, kPoints> poly;
  T area = T(0);
};

// A quadrilateral, counter-clockwise, and its area (0 if not finite).
template <typename T>
struct Quad {
  Polygon<T, 4> poly;
  T area = T(0);
};

template <typename T>
C10_HOST_DEVICE inline bool all_finite(const Point<T>* p, int n) {
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    ok = ok && host_device_math::is_finite(p[i].x) && host_device_math::is_finite(p[i].y);
  }
  return ok;
}

template <typename T>
C10_HOST_DEVICE inline Hull<T> make_hull(const Point<T>* pts) {
  Hull<T> h;
  if (!all_finite(pts, kPoints)) {
    return h;
  }
  int idx[kPoints];
  const int n = convex_hull::hull_indices<kPoints>(pts, kPoints, idx);
  for (int i = 0; i < n; ++i) {
    h.poly.push(pts[idx[i]]);
  }
  h.area = n >= 3 ? polygon::signed_area(h.poly) : T(0);
  return h;
}

template <typename T>
C10_HOST_DEVICE inline Quad<T> make_quad(const Point<T>* corners) {
  Quad<T> q;
  for (int i = 0; i < 4; ++i) {
    q.poly.push(corners[i]);
  }
  if (!all_finite(corners, 4)) {
    return q; // area 0: overlaps nothing
  }
  polygon::make_counter_clockwise(q.poly);
  q.area = polygon::signed_area(q.poly);
  return q;
}

// IoU of a hull and a quadrilateral, computed around the midpoint of their
// first vertices (large coordinates keep their precision); 0 when either is
// degenerate or not finite.
template <typename T>
C10_HOST_DEVICE inline T hull_quad_iou(const Hull<T>& h, const Quad<T>& q) {
  if (!(h.area > T(0)) || !(q.area > T(0))) {
    return T(0);
  }
  const Point<T> o = polygon::local_origin(h.poly.v[0], q.poly.v[0]);
  Polygon<T, kPoints> a;
  Polygon<T, 4> b;
  for (int i = 0; i < h.poly.n; ++i) {
    a.push(Point<T>{h.poly.v[i].x - o.x, h.poly.v[i].y - o.y});
  }
  for (int i = 0; i < 4; ++i) {
    b.push(Point<T>{q.poly.v[i].x - o.x, q.poly.v[i].y - o.y});
  }
  const T inter = polygon::intersection_area<kClip>(a, b, h.area, q.area);
  return polygon::overlap_from_areas(inter, h.area, q.area, false);
}

// int over [s0, s1] of (1 - s) and of s, for the part of the segment
// p -> p + d inside the counter-clockwise convex quadrilateral q.
template <typename T>
C10_HOST_DEVICE inline void inside_moments(const Point<T>& p, const Point<T>& d, const Polygon<T, 4>& q, T& m0, T& m1) {
  T s0 = T(0), s1 = T(1);
  for (int e = 0; e < 4 && s0 <= s1; ++e) {
    const Point<T>& c = q.v[e];
    const Point<T>& f = q.v[(e + 1) & 3];
    const Point<T> end{p.x + d.x, p.y + d.y};
    const T fa = polygon::cross(c, f, p);
    const T fb = polygon::cross(c, f, end);
    if (fa < T(0) && fb < T(0)) {
      s1 = T(-1); // outside this half-plane
    } else if (fa < T(0)) {
      const T s = fa / (fa - fb);
      s0 = s > s0 ? s : s0;
    } else if (fb < T(0)) {
      const T s = fa / (fa - fb);
      s1 = s < s1 ? s : s1;
    }
  }
  if (!(s0 < s1)) {
    m0 = m1 = T(0);
    return;
  }
  m1 = (s1 * s1 - s0 * s0) / T(2);
  m0 = (s1 - s0) - m1;
}

// Shoelace gradient of a counter-clockwise polygon's area at vertex v,
// between its neighbours prev and next.
template <typename T>
C10_HOST_DEVICE inline Point<T> area_gradient(const Point<T>& prev, const Point<T>& next) {
  return Point<T>{(next.y - prev.y) / T(2), (prev.x - next.x) / T(2)};
}

// The parts of giou's gradient for each hull vertex: dI, dA, dC.
template <typename T>
struct HullGradients {
  Point<T> inter[kPoints], area[kPoints], enclosing[kPoints];
};

// The hull vertices' gradients; h: hull (local coordinates, counter-clockwise,
// n >= 3), q: the quadrilateral (local, counter-clockwise). Returns C.
template <typename T>
C10_HOST_DEVICE inline T hull_gradients(const Polygon<T, kPoints>& h, const Polygon<T, 4>& q, bool overlap,
                                        HullGradients<T>& g) {
  const int n = h.n;
  for (int k = 0; k < n; ++k) {
    g.inter[k] = g.enclosing[k] = Point<T>{T(0), T(0)};
    g.area[k] = area_gradient(h.v[k == 0 ? n - 1 : k - 1], h.v[k + 1 == n ? 0 : k + 1]);
  }
  for (int k = 0; k < n && overlap; ++k) { // dI, edge k = (v[k], v[k + 1])
    const int k1 = k + 1 == n ? 0 : k + 1;
    const Point<T> d{h.v[k1].x - h.v[k].x, h.v[k1].y - h.v[k].y};
    T m0, m1;
    inside_moments(h.v[k], d, q, m0, m1);
    const Point<T> normal{d.y, -d.x}; // outward, times the edge's length
    g.inter[k].x += normal.x * m0, g.inter[k].y += normal.y * m0;
    g.inter[k1].x += normal.x * m1, g.inter[k1].y += normal.y * m1;
  }
  Point<T> all[kPoints + 4];
  for (int k = 0; k < n; ++k) {
    all[k] = h.v[k];
  }
  for (int k = 0; k < 4; ++k) {
    all[n + k] = q.v[k];
  }
  int idx[kPoints + 4];
  const int m = convex_hull::hull_indices<kPoints + 4>(all, n + 4, idx);
  Polygon<T, kPoints + 4> enclosing;
  for (int i = 0; i < m; ++i) {
    enclosing.push(all[idx[i]]);
    if (idx[i] < n) { // a hull vertex (on ties the hull's, the lower index)
      g.enclosing[idx[i]] = area_gradient(all[idx[i == 0 ? m - 1 : i - 1]], all[idx[i + 1 == m ? 0 : i + 1]]);
    }
  }
  return m >= 3 ? polygon::signed_area(enclosing) : T(0);
}

// giou of the point set pts[0, 9) and the quadrilateral corners[0, 4), and
// d giou / d pts in grad[0, 18). A non-finite coordinate: giou 0, gradient 0.
// Terms whose denominator (U or C) is 0 are left out (a zero-area union or
// enclosing hull).
template <typename T>
C10_HOST_DEVICE inline T convex_giou(const Point<T>* in, const Point<T>* corners, T* grad) {
  for (int i = 0; i < 2 * kPoints; ++i) {
    grad[i] = T(0);
  }
  if (!all_finite(in, kPoints) || !all_finite(corners, 4)) {
    return T(0);
  }
  const Point<T> o = in[0];
  Point<T> pts[kPoints];
  for (int i = 0; i < kPoints; ++i) {
    pts[i] = Point<T>{in[i].x - o.x, in[i].y - o.y};
  }
  int idx[kPoints];
  const int n = convex_hull::hull_indices<kPoints>(pts, kPoints, idx);
  Polygon<T, kPoints> h;
  for (int i = 0; i < n; ++i) {
    h.push(pts[idx[i]]);
  }
  Polygon<T, 4> q;
  for (int i = 0; i < 4; ++i) {
    q.push(Point<T>{corners[i].x - o.x, corners[i].y - o.y});
  }
  polygon::make_counter_clockwise(q);
  const T a = n >= 3 ? polygon::signed_area(h) : T(0);
  const T b = polygon::signed_area(q);
  const T inter = polygon::intersection_area<kClip>(h, q, a, b);
  const T uni = a + b - inter;
  if (n < 3) { // no hull vertex moves an area: giou from the enclosing hull only
    Point<T> all[kPoints + 4];
    for (int k = 0; k < n; ++k) {
      all[k] = h.v[k];
    }
    for (int k = 0; k < 4; ++k) {
      all[n + k] = q.v[k];
    }
    int e[kPoints + 4];
    const int m = convex_hull::hull_indices<kPoints + 4>(all, n + 4, e);
    Polygon<T, kPoints + 4> enc;
    for (int i = 0; i < m; ++i) {
      enc.push(all[e[i]]);
    }
    const T c = m >= 3 ? polygon::signed_area(enc) : T(0);
    return c > T(0) ? -(c - uni) / c : T(0);
  }
  HullGradients<T> g;
  const T c = hull_gradients(h, q, inter > T(0), g);
  const T iou = uni > T(0) ? inter / uni : T(0);
  const T giou = c > T(0) ? iou - (c - uni) / c : iou;
  for (int k = 0; k < n; ++k) {
    // d(I / U) = dI / U - I / U^2 (dA - dI); d(U / C) = (dA - dI) / C - U / C^2 dC
    T gx = T(0), gy = T(0);
    if (uni > T(0)) {
      gx += g.inter[k].x / uni - inter / (uni * uni) * (g.area[k].x - g.inter[k].x);
      gy += g.inter[k].y / uni - inter / (uni * uni) * (g.area[k].y - g.inter[k].y);
    }
    if (c > T(0)) {
      gx += (g.area[k].x - g.inter[k].x) / c - uni / (c * c) * g.enclosing[k].x;
      gy += (g.area[k].y - g.inter[k].y) / c - uni / (c * c) * g.enclosing[k].y;
    }
    grad[2 * idx[k]] = gx;
    grad[2 * idx[k] + 1] = gy;
  }
  return giou;
}

} // namespace convex_iou_math
} // namespace mmops
