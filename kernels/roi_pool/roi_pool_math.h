#pragma once
// RoIPool geometry, shared by the CPU and CUDA kernels (torchvision semantics).
//
//  * box corners are scaled by spatial_scale and rounded half away from zero;
//    the box spans [start, end] inclusive, at least 1 pixel per side;
//  * bin p of an axis covers [floor(p * bin), ceil((p + 1) * bin)) + start,
//    bin = box size / pooled size, clamped into the map;
//  * a bin's value is the maximum of its pixels (the first one wins ties, a
//    NaN wins and sticks, as torch.amax); an empty bin is 0 with argmax -1.
// Defined extras: a non-finite box coordinate (or batch index outside [0, N))
// makes the roi pool zeros with argmax -1 (no gradient); rounded coordinates
// are clamped to +-2^24 before the integer conversion (no overflow).

#include <c10/macros/Macros.h>

#include "common/fixed_point.h"
#include "common/host_device_math.h"

#include <cmath>
#include <cstdint>

namespace mmops {
namespace roi_pool_math {

using host_device_math::batch_index;
using host_device_math::ceil_of;
using host_device_math::floor_of;
using host_device_math::is_finite;
using host_device_math::MaxTracker;
using host_device_math::round_away;

constexpr double kMaxCoord = 16777216.0; // 2^24

template <typename T>
C10_HOST_DEVICE inline int64_t rounded_coord(T v) {
  T r = round_away(v);
  r = r < T(-kMaxCoord) ? T(-kMaxCoord) : (r > T(kMaxCoord) ? T(kMaxCoord) : r);
  return static_cast<int64_t>(r);
}

// One roi on the feature map.
template <typename T>
struct PoolBox {
  int64_t start_h, start_w; // rounded top-left corner
  T bin_h, bin_w;           // bin size (box size / pooled size)
  bool valid;               // false: a coordinate is not finite (pools zeros)
};

template <typename T>
C10_HOST_DEVICE inline PoolBox<T> make_pool_box(T x1, T y1, T x2, T y2, T spatial_scale, int64_t pooled_h,
                                                int64_t pooled_w) {
  PoolBox<T> b;
  const T sx1 = x1 * spatial_scale, sy1 = y1 * spatial_scale;
  const T sx2 = x2 * spatial_scale, sy2 = y2 * spatial_scale;
  b.valid = is_finite(sx1) && is_finite(sy1) && is_finite(sx2) && is_finite(sy2);
  if (!b.valid) {
    b.start_h = b.start_w = 0;
    b.bin_h = b.bin_w = T(0);
    return b;
  }
  b.start_w = rounded_coord(sx1);
  b.start_h = rounded_coord(sy1);
  const int64_t end_w = rounded_coord(sx2), end_h = rounded_coord(sy2);
  const int64_t roi_w = end_w - b.start_w + 1 > 1 ? end_w - b.start_w + 1 : 1;
  const int64_t roi_h = end_h - b.start_h + 1 > 1 ? end_h - b.start_h + 1 : 1;
  b.bin_w = static_cast<T>(roi_w) / static_cast<T>(pooled_w);
  b.bin_h = static_cast<T>(roi_h) / static_cast<T>(pooled_h);
  return b;
}

// [begin, end) of bin p along one axis, clamped into [0, size].
struct Range {
  int64_t begin, end;
};

template <typename T>
C10_HOST_DEVICE inline Range bin_range(int64_t start, T bin, int64_t p, int64_t size) {
  int64_t b = static_cast<int64_t>(floor_of(static_cast<T>(p) * bin)) + start;
  int64_t e = static_cast<int64_t>(ceil_of(static_cast<T>(p + 1) * bin)) + start;
  b = b < 0 ? 0 : (b > size ? size : b);
  e = e < 0 ? 0 : (e > size ? size : e);
  return {b, e};
}

// Running maximum of a bin (index: the pixel h * W + w): host_device_math::MaxTracker.
// Deterministic gradient sums: int64 fixed point (common/fixed_point.h).
using fixed_point::fixed_point_scale;

} // namespace roi_pool_math
} // namespace mmops
