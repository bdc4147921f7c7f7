#pragma once
// mmcv's point-in-quadrilateral rule (CPU and CUDA): a crossing count of the
// horizontal ray to the right of the point, edges visited as (v0, v3),
// (v1, v0), (v2, v1), (v3, v2). A point equal to an edge's end point, or on
// a non-horizontal edge (the crossing's x equals the point's x), stops the
// count: the result is then the parity of the crossings counted so far, as
// in mmcv (so boundary points may come out inside or outside, depending on
// the edge where they lie). Any non-finite coordinate: outside (0).

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"

namespace mmops {
namespace points_in_polygons_math {

// 1 inside, 0 outside, for the point (px, py) and the polygon q[0, 8).
template <typename T>
C10_HOST_DEVICE inline T point_in_quad(T px, T py, const T* q) {
  bool finite = host_device_math::is_finite(px) && host_device_math::is_finite(py);
  for (int k = 0; k < 8; ++k) {
    finite = finite && host_device_math::is_finite(q[k]);
  }
  if (!finite) {
    return T(0);
  }
  int crossings = 0;
  for (int i = 0, j = 3; i < 4; j = i, ++i) {
    const T sx = q[2 * i], sy = q[2 * i + 1];
    const T tx = q[2 * j], ty = q[2 * j + 1];
    if (py < (sy < ty ? sy : ty) || py > (sy > ty ? sy : ty)) {
      continue;
    }
    if ((sx == px && sy == py) || (tx == px && ty == py)) {
      break; // on a vertex
    }
    if ((sy < py && ty >= py) || (sy >= py && ty < py)) {
      const T x = sx + (py - sy) * (tx - sx) / (ty - sy);
      if (x == px) {
        break; // on the edge
      }
      crossings += x > px ? 1 : 0;
    }
  }
  return (crossings & 1) ? T(1) : T(0);
}

} // namespace points_in_polygons_math
} // namespace mmops
