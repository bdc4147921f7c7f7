#pragma once
// The rules of furthest point sampling, shared by the CPU and CUDA kernels so
// that both pick bitwise the same indices:
//   - the first pick is point 0;
//   - every point keeps its smallest distance to the points picked so far,
//     starting from kInitialDistance (1e10, as mmcv); a NaN distance counts as
//     0 (the point is as good as picked: mmcv's fminf would instead keep 1e10
//     and pick such a point over and over), so the kept value is never NaN;
//   - the next pick is the point with the largest kept distance, the lowest
//     index among equal ones (mmcv's block reduction does not promise that).
// Squared distances are summed as ((dx*dx + dy*dy) + dz*dz) with products that
// are never fused into an FMA.

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"

#include <cstdint>

namespace mmops {
namespace fps_math {

constexpr double kInitialDistance = 1e10;

// Squared distance of point (x2, y2, z2) to the picked point (x1, y1, z1).
template <typename T>
C10_HOST_DEVICE inline T square_distance(T x1, T y1, T z1, T x2, T y2, T z2) {
  const T dx = x2 - x1, dy = y2 - y1, dz = z2 - z1;
  return host_device_math::mul_rn(dx, dx) + host_device_math::mul_rn(dy, dy) + host_device_math::mul_rn(dz, dz);
}

// The kept distance after seeing distance d (NaN counts as 0).
template <typename T>
C10_HOST_DEVICE inline T kept_distance(T kept, T d) {
  if (d != d) {
    d = T(0);
  }
  return d < kept ? d : kept;
}

// Whether candidate (value, index) beats (best, best_index): larger value,
// then lower index. Values are never NaN.
template <typename T>
C10_HOST_DEVICE inline bool beats(T value, int32_t index, T best, int32_t best_index) {
  return value > best || (value == best && index < best_index);
}

} // namespace fps_math
} // namespace mmops
