#pragma once
// Convex hull of a small point set (the 9 points of an Oriented RepPoints set,
// or a hull plus a polygon's corners) on CPU and CUDA: Andrew's monotone
// chain over an insertion sort, so no heap and no recursion.
//
// Deterministic on degenerate input:
//   * points are ordered by (x, y, index); of equal points only the one with
//     the lowest index is used, so gradients go to that one;
//   * collinear points on an edge are dropped (a turn must be strictly left);
//   * the hull is counter-clockwise (y up) and starts at the point with the
//     smallest x (then smallest y); all points equal: 1 vertex; all points
//     collinear: the 2 end points.
// Callers check that the coordinates are finite first (NaN breaks ordering).
//
// The turn tests round every product on its own on the device too (mul_rn):
// nvcc would fuse a * b - c * d into an FMA where the host compiler (x86-64,
// no -mfma) does not, so CUDA and CPU keep or drop the same near-collinear
// vertices.

#include <c10/macros/Macros.h>

#include "polygon.h"

namespace mmops {
namespace convex_hull {

using polygon::Point;

using host_device_math::mul_rn;

// polygon::cross rounds each product on its own too (mul_rn, no FMA on the
// device); the hull's turn tests use it.
using polygon::cross;

template <typename T>
C10_HOST_DEVICE inline bool before(const Point<T>& a, int ia, const Point<T>& b, int ib) {
  if (a.x != b.x) {
    return a.x < b.x;
  }
  if (a.y != b.y) {
    return a.y < b.y;
  }
  return ia < ib;
}

// Writes the indices (into pts) of the hull's vertices, counter-clockwise, to
// `hull` (room for n) and returns their count. n <= Max.
template <int Max, typename T>
C10_HOST_DEVICE inline int hull_indices(const Point<T>* pts, int n, int* hull) {
  int order[Max];
  int m = 0;
  for (int i = 0; i < n; ++i) { // insertion sort by (x, y, index)
    int j = m++;
    while (j > 0 && before(pts[i], i, pts[order[j - 1]], order[j - 1])) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = i;
  }
  int unique = 0;
  for (int i = 0; i < m; ++i) { // keep the lowest index of equal points
    const Point<T>& p = pts[order[i]];
    if (unique == 0 || p.x != pts[order[unique - 1]].x || p.y != pts[order[unique - 1]].y) {
      order[unique++] = order[i];
    }
  }
  if (unique <= 2) {
    for (int i = 0; i < unique; ++i) {
      hull[i] = order[i];
    }
    return unique;
  }
  // Lower chain left to right, then upper chain right to left; 2 * unique
  // slots would be needed with the closing point, the last one is dropped.
  int stack[2 * Max];
  int k = 0;
  for (int i = 0; i < unique; ++i) {
    while (k >= 2 && cross(pts[stack[k - 2]], pts[stack[k - 1]], pts[order[i]]) <= T(0)) {
      --k;
    }
    stack[k++] = order[i];
  }
  for (int i = unique - 2, lower = k + 1; i >= 0; --i) {
    while (k >= lower && cross(pts[stack[k - 2]], pts[stack[k - 1]], pts[order[i]]) <= T(0)) {
      --k;
    }
    stack[k++] = order[i];
  }
  --k; // the first point closes the chain
  for (int i = 0; i < k; ++i) {
    hull[i] = stack[i];
  }
  return k;
}

// Rotates hull[0, n) so that it starts at the vertex with the smallest y
// (then smallest x), the start mmcv's hulls use (its tie-breaks follow the
// hull's edge order).
template <typename T>
C10_HOST_DEVICE inline void start_at_lowest(const Point<T>* pts, int* hull, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    const Point<T>& p = pts[hull[i]];
    const Point<T>& b = pts[hull[best]];
    if (p.y < b.y || (p.y == b.y && p.x < b.x)) {
      best = i;
    }
  }
  for (int r = 0; r < best; ++r) { // n <= a few dozen: rotate by one, best times
    const int first = hull[0];
    for (int i = 0; i + 1 < n; ++i) {
      hull[i] = hull[i + 1];
    }
    hull[n - 1] = first;
  }
}

} // namespace convex_hull
} // namespace mmops
