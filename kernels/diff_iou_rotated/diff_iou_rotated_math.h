#pragma once
// Differentiable IoU of two rotated boxes, forward and analytic backward,
// shared by the CPU and CUDA kernels. T is the compute type (float for
// float/half/bfloat16, double for double).
//
// Forward: the Sutherland-Hodgman clip of box a by the edges of box b, the
// same steps as polygon::intersection_area (same values), but every vertex
// also records where it comes from: a corner of a or b, or the crossing of
// two box edges (lines 0-3: a's edges, 4-7: b's edges; edge k runs from
// corner k to corner k + 1). Backward: the shoelace area's gradient to the
// vertices, through each vertex's provenance to the 8 corners, then to
// (x, y, w, h, alpha). The clip decides the polygon's combinatorics; at
// non-differentiable configurations (identical boxes, a corner on an edge)
// the gradient is that of the polygon the clip produced (a one-sided
// derivative, finite). Boxes with a non-finite parameter or w, h (l in 3D)
// <= 0 have IoU 0 and gradient 0.

#include "common/polygon.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace diff_iou_rotated_math {

using polygon::cross;
using polygon::Point;

constexpr int kMaxVertices = 8; // as polygon::rotated_box_overlap's clip buffers

// A vertex of the intersection polygon: its position, its provenance (a
// corner 0-7, or the crossing of lines l1 and l2) and the line its outgoing
// segment lies on.
template <typename T>
struct Vertex {
  Point<T> p;
  int8_t corner; // 0-7, or -1 for a crossing
  int8_t l1, l2; // crossing lines (corner < 0)
  int8_t out;    // line of the segment to the next vertex
};

template <typename T>
struct Clip {
  Vertex<T> v[kMaxVertices];
  int n = 0;
  C10_HOST_DEVICE inline void push(const Vertex<T>& x) {
    if (n < kMaxVertices) {
      v[n++] = x;
    }
  }
};

// The corners of both boxes (a: 0-3, b: 4-7) around their local origin, and the areas.
template <typename T>
struct Pair {
  Point<T> c[8];
  T area_a, area_b;
};

// (x, y, w, h, alpha) of a box: finite, w > 0, h > 0.
template <typename T>
C10_HOST_DEVICE inline bool valid_box(const T* b) {
  for (int i = 0; i < 5; ++i) {
    if (!host_device_math::is_finite(b[i])) {
      return false;
    }
  }
  return b[2] > T(0) && b[3] > T(0);
}

template <typename T>
C10_HOST_DEVICE inline Pair<T> make_pair(const T* a, const T* b) {
  const Point<T> origin = polygon::local_origin(Point<T>{a[0], a[1]}, Point<T>{b[0], b[1]});
  const polygon::Polygon<T, 4> pa = polygon::rotated_box_corners(a[0], a[1], a[2], a[3], a[4], origin);
  const polygon::Polygon<T, 4> pb = polygon::rotated_box_corners(b[0], b[1], b[2], b[3], b[4], origin);
  Pair<T> r;
  for (int k = 0; k < 4; ++k) {
    r.c[k] = pa.v[k];
    r.c[k + 4] = pb.v[k];
  }
  r.area_a = polygon::signed_area(pa);
  r.area_b = polygon::signed_area(pb);
  return r;
}

// The corner where lines l and e (both b's) meet, or -1 (parallel edges).
C10_HOST_DEVICE inline int shared_corner(int l, int e) {
  if (e == 4 + ((l - 4 + 1) & 3)) {
    return e;
  }
  if (l == 4 + ((e - 4 + 1) & 3)) {
    return l;
  }
  return -1;
}

// One clip step: the part of `in` left of (or on) b's edge e (line 4 + e).
template <typename T>
C10_HOST_DEVICE inline void clip_step(const Clip<T>& in, const Pair<T>& g, int e, Clip<T>& out) {
  const Point<T>& a = g.c[4 + e];
  const Point<T>& b = g.c[4 + ((e + 1) & 3)];
  const int8_t line = static_cast<int8_t>(4 + e);
  out.n = 0;
  for (int i = 0; i < in.n; ++i) {
    const Vertex<T>& p = in.v[i];
    const Vertex<T>& q = in.v[i + 1 == in.n ? 0 : i + 1];
    const T dp = cross(a, b, p.p);
    const T dq = cross(a, b, q.p);
    if (dp >= T(0)) {
      Vertex<T> kept = p;
      if (dp == T(0) && dq < T(0)) {
        kept.out = line; // the polygon continues along the clip line
      }
      out.push(kept);
    }
    if ((dp > T(0) && dq < T(0)) || (dp < T(0) && dq > T(0))) {
      const T t = dp / (dp - dq);
      Vertex<T> x;
      // mul_rn as polygon.h's clip_by_edge: the same cut point on every device
      x.p = Point<T>{p.p.x + host_device_math::mul_rn(t, q.p.x - p.p.x),
                     p.p.y + host_device_math::mul_rn(t, q.p.y - p.p.y)};
      x.corner = p.out >= 4 ? static_cast<int8_t>(shared_corner(p.out, line)) : int8_t(-1);
      x.l1 = p.out;
      x.l2 = line;
      x.out = dp > T(0) ? line : p.out; // leaving: along the clip line; entering: along p's segment
      out.push(x);
    }
  }
}

// The intersection polygon (n < 3: empty) and its signed area. The four clip
// steps ping-pong between `result` and one more buffer, unrolled, so that no
// buffer is picked by a run-time index (and copied) on the GPU.
template <typename T>
C10_HOST_DEVICE inline T intersection(const Pair<T>& g, Clip<T>& result) {
  Clip<T> other;
  result.n = 0;
  for (int k = 0; k < 4; ++k) {
    result.push(Vertex<T>{g.c[k], static_cast<int8_t>(k), -1, -1, static_cast<int8_t>(k)});
  }
  clip_step(result, g, 0, other);
  if (other.n >= 3) {
    clip_step(other, g, 1, result);
    if (result.n >= 3) {
      clip_step(result, g, 2, other);
      if (other.n >= 3) {
        clip_step(other, g, 3, result);
      } else {
        result.n = 0;
      }
    }
  } else {
    result.n = 0;
  }
  if (result.n < 3) {
    result.n = 0;
    return T(0);
  }
  T twice = T(0);
  for (int i = 1; i + 1 < result.n; ++i) {
    twice += cross(result.v[0].p, result.v[i].p, result.v[i + 1].p);
  }
  return twice / T(2);
}

// The intersection area clamped to [0, min(area_a, area_b)], as
// polygon::intersection_area. The polygon lies in both boxes, so the upper
// clamp acts only on rounding (a contained box, or a corner within an ulp of
// an edge); the backward keeps the polygon's gradient there: the box area's
// would drop the term of a barely poking-out corner, a jump that the two
// devices' roundings (FMA) would make at different pairs.
template <typename T>
C10_HOST_DEVICE inline T clamp_intersection(T raw, T area_a, T area_b) {
  const T smaller = area_a < area_b ? area_a : area_b;
  if (!(raw > T(0))) {
    return T(0);
  }
  return raw > smaller ? smaller : raw;
}

// Reverse mode of P = l1 x l2 (the crossing of the lines through corners
// (p1, p2) and (p3, p4)) into the corner gradients gc.
template <typename T>
C10_HOST_DEVICE inline void crossing_backward(const Point<T>* c, int l1, int l2, Point<T> gp, Point<T>* gc) {
  const int i1 = l1, i2 = (l1 & 4) | ((l1 + 1) & 3);
  const int i3 = l2, i4 = (l2 & 4) | ((l2 + 1) & 3);
  const Point<T> d1{c[i2].x - c[i1].x, c[i2].y - c[i1].y};
  const Point<T> d2{c[i4].x - c[i3].x, c[i4].y - c[i3].y};
  const Point<T> r{c[i3].x - c[i1].x, c[i3].y - c[i1].y};
  const T den = d1.x * d2.y - d1.y * d2.x;
  if (den == T(0) || !host_device_math::is_finite(den)) {
    return; // parallel lines: no defined crossing, no gradient
  }
  const T t = (r.x * d2.y - r.y * d2.x) / den;
  // P = p1 + t d1
  const T g_t = gp.x * d1.x + gp.y * d1.y;
  Point<T> g_d1{t * gp.x, t * gp.y};
  const T g_num = g_t / den;
  const T g_den = -g_t * t / den;
  // num = r x d2, den = d1 x d2
  const Point<T> g_r{g_num * d2.y, -g_num * d2.x};
  Point<T> g_d2{-g_num * r.y + -g_den * d1.y, g_num * r.x + g_den * d1.x};
  g_d1.x += g_den * d2.y;
  g_d1.y -= g_den * d2.x;
  gc[i1].x += gp.x - g_r.x - g_d1.x;
  gc[i1].y += gp.y - g_r.y - g_d1.y;
  gc[i2].x += g_d1.x;
  gc[i2].y += g_d1.y;
  gc[i3].x += g_r.x - g_d2.x;
  gc[i3].y += g_r.y - g_d2.y;
  gc[i4].x += g_d2.x;
  gc[i4].y += g_d2.y;
}

// d(polygon area) * g into the corner gradients, through each vertex's provenance.
template <typename T>
C10_HOST_DEVICE inline void area_backward(const Pair<T>& g, const Clip<T>& poly, T grad, Point<T>* gc) {
  for (int k = 0; k < poly.n; ++k) {
    const Point<T>& prev = poly.v[k == 0 ? poly.n - 1 : k - 1].p;
    const Point<T>& next = poly.v[k + 1 == poly.n ? 0 : k + 1].p;
    const Point<T> gp{grad * (next.y - prev.y) / T(2), grad * (prev.x - next.x) / T(2)};
    const Vertex<T>& v = poly.v[k];
    if (v.corner >= 0) {
      gc[v.corner].x += gp.x;
      gc[v.corner].y += gp.y;
    } else {
      crossing_backward(g.c, v.l1, v.l2, gp, gc);
    }
  }
}

// Corner gradients gc[0..3] of box (x, y, w, h, alpha) into its parameters
// (grad_area: the gradient of the box's area w * h). Corner k is the centre
// plus R(alpha) (sx w / 2, sy h / 2), (sx, sy) as in polygon::rotated_box_corners.
template <typename T>
C10_HOST_DEVICE inline void box_backward(const T* box, const Point<T>* gc, T grad_area, T* out) {
  const T c = host_device_math::cos_of(box[4]);
  const T s = host_device_math::sin_of(box[4]);
  const T hw = box[2] / T(2), hh = box[3] / T(2);
  const T sx[4] = {T(-1), T(1), T(1), T(-1)};
  const T sy[4] = {T(-1), T(-1), T(1), T(1)};
  T gx = T(0), gy = T(0), gw = grad_area * box[3], gh = grad_area * box[2], ga = T(0);
  for (int k = 0; k < 4; ++k) {
    gx += gc[k].x;
    gy += gc[k].y;
    gw += (gc[k].x * c + gc[k].y * s) * sx[k] / T(2);
    gh += (gc[k].y * c - gc[k].x * s) * sy[k] / T(2);
    // d corner / d alpha = R'(alpha) (sx hw, sy hh)
    const T px = sx[k] * hw, py = sy[k] * hh;
    ga += gc[k].x * (-s * px - c * py) + gc[k].y * (c * px - s * py);
  }
  out[0] = gx;
  out[1] = gy;
  out[2] = gw;
  out[3] = gh;
  out[4] = ga;
}

// The box pair's 2D part (x, y, w, h, alpha) from a 2D [5] or 3D [7] row
// (3D: x, y, z, w, h, l, alpha).
template <int D>
C10_HOST_DEVICE constexpr int column_2d(int i) {
  return D == 7 ? (i < 2 ? i : (i < 4 ? i + 1 : 6)) : i;
}

template <int D, typename scalar_t, typename T>
C10_HOST_DEVICE inline void load_2d(const scalar_t* row, T* out) {
  for (int i = 0; i < 5; ++i) {
    out[i] = static_cast<T>(row[column_2d<D>(i)]);
  }
}

// The z extent (z - l / 2, z + l / 2) overlap of two 3D rows and its
// gradients to (z1, l1, z2, l2); 0 and no gradient when they do not overlap.
template <typename T>
struct ZOverlap {
  T value, dz1, dl1, dz2, dl2;
};

template <typename T>
C10_HOST_DEVICE inline ZOverlap<T> z_overlap(T z1, T l1, T z2, T l2) {
  const T top1 = z1 + l1 / T(2), top2 = z2 + l2 / T(2);
  const T bottom1 = z1 - l1 / T(2), bottom2 = z2 - l2 / T(2);
  const T top = top1 < top2 ? top1 : top2;
  const T bottom = bottom1 > bottom2 ? bottom1 : bottom2;
  const T value = top - bottom;
  if (!(value > T(0))) {
    return {T(0), T(0), T(0), T(0), T(0)};
  }
  // min / max ties split the gradient evenly (as torch.minimum / maximum)
  const T w_top1 = top1 < top2 ? T(1) : (top1 == top2 ? T(0.5) : T(0));
  const T w_bottom1 = bottom1 > bottom2 ? T(1) : (bottom1 == bottom2 ? T(0.5) : T(0));
  const T w_top2 = T(1) - w_top1, w_bottom2 = T(1) - w_bottom1;
  return {value, w_top1 - w_bottom1, (w_top1 + w_bottom1) / T(2), w_top2 - w_bottom2, (w_top2 + w_bottom2) / T(2)};
}

// IoU of one pair of D-column rows (D = 5: 2D, D = 7: 3D), and when grad_a
// is not null its gradient times `grad` into grad_a[D], grad_b[D].
template <int D, typename scalar_t, typename T>
C10_HOST_DEVICE inline T pair_iou(const scalar_t* ra, const scalar_t* rb, T grad, T* grad_a, T* grad_b) {
  T a[5], b[5];
  load_2d<D>(ra, a);
  load_2d<D>(rb, b);
  if (grad_a != nullptr) {
    for (int i = 0; i < D; ++i) {
      grad_a[i] = T(0);
      grad_b[i] = T(0);
    }
  }
  T za = T(0), la = T(1), zb = T(0), lb = T(1);
  if (D == 7) {
    za = static_cast<T>(ra[2]);
    la = static_cast<T>(ra[5]);
    zb = static_cast<T>(rb[2]);
    lb = static_cast<T>(rb[5]);
    const bool finite = host_device_math::is_finite(za) && host_device_math::is_finite(la) &&
                        host_device_math::is_finite(zb) && host_device_math::is_finite(lb);
    if (!finite || !(la > T(0)) || !(lb > T(0))) {
      return T(0);
    }
  }
  if (!valid_box(a) || !valid_box(b)) {
    return T(0);
  }
  const Pair<T> g = make_pair(a, b);
  if (!(g.area_a > T(0)) || !(g.area_b > T(0))) {
    return T(0);
  }
  Clip<T> poly;
  const T inter = clamp_intersection(intersection(g, poly), g.area_a, g.area_b);
  const ZOverlap<T> zo = D == 7 ? z_overlap(za, la, zb, lb) : ZOverlap<T>{T(1), T(0), T(0), T(0), T(0)};
  const T overlap = inter * zo.value;
  const T vol_a = g.area_a * la, vol_b = g.area_b * lb;
  const T uni = vol_a + vol_b - overlap;
  const T iou = overlap / uni;
  if (!(uni > T(0)) || !host_device_math::is_finite(iou)) {
    return T(0);
  }
  if (grad_a == nullptr || overlap == T(0)) {
    return iou; // no overlap: gradient 0 (the IoU is flat 0 around separated boxes)
  }
  const T g_overlap = grad * (vol_a + vol_b) / (uni * uni);
  const T g_vol = -grad * overlap / (uni * uni);
  const T g_inter = g_overlap * zo.value;
  Point<T> gc[8];
  for (int k = 0; k < 8; ++k) {
    gc[k] = Point<T>{T(0), T(0)};
  }
  area_backward(g, poly, g_inter, gc);
  // the union's areas
  const T g_area_a = g_vol * la;
  const T g_area_b = g_vol * lb;
  T ga[5], gb[5];
  box_backward(a, gc, g_area_a, ga);
  box_backward(b, gc + 4, g_area_b, gb);
  for (int i = 0; i < 5; ++i) {
    grad_a[column_2d<D>(i)] = ga[i];
    grad_b[column_2d<D>(i)] = gb[i];
  }
  if (D == 7) {
    const T g_zo = g_overlap * inter;
    grad_a[2] = g_zo * zo.dz1;
    grad_b[2] = g_zo * zo.dz2;
    grad_a[5] = g_zo * zo.dl1 + g_vol * g.area_a;
    grad_b[5] = g_zo * zo.dl2 + g_vol * g.area_b;
  }
  return iou;
}

} // namespace diff_iou_rotated_math
} // namespace mmops
