#pragma once
// Loading a row of pointsets (9 points) or polygons (4 corners) in the
// compute type, shared by the CPU and CUDA kernels.

#include <c10/macros/Macros.h>

#include <cstdint>

#include "common/polygon.h"

namespace mmops {
namespace convex_iou_math {

template <int Count, typename acc_t, typename scalar_t>
C10_HOST_DEVICE inline void load_points(const scalar_t* data, int64_t row, polygon::Point<acc_t>* out) {
  const scalar_t* p = data + row * (2 * Count);
  for (int k = 0; k < Count; ++k) {
    out[k] = polygon::Point<acc_t>{static_cast<acc_t>(p[2 * k]), static_cast<acc_t>(p[2 * k + 1])};
  }
}

} // namespace convex_iou_math
} // namespace mmops
