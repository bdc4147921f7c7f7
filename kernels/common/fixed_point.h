#pragma once
// Deterministic gradient sums on CUDA: instead of float atomics, whose total
// depends on the order of the adds, add int64 fixed-point values
// round(value * scale) with integer atomics (exact, so order-free), then
// convert once. A target receives at most `adds_bound` values of magnitude at
// most max_abs each (for a bilinear or integral scatter: weights summing to at
// most 1 per output); the scale is the largest power of two that keeps their
// total under 2^62, at most 2^1000 (tiny gradients). NaN when max_abs is not
// finite: no fixed point represents it, the conversion writes NaN.

#include "common/host_device_math.h"

#include <c10/macros/Macros.h>

#include <cmath>

namespace mmops {
namespace fixed_point {

C10_HOST_DEVICE inline double fixed_point_scale(double max_abs, double adds_bound) {
  if (max_abs == 0.0) {
    return 1.0;
  }
  if (!host_device_math::is_finite(max_abs)) {
    return NAN;
  }
  const double bound = max_abs * (adds_bound > 1.0 ? adds_bound : 1.0);
#ifdef __CUDA_ARCH__
  const double e = floor(62.0 - log2(bound));
  return exp2(e < 1000.0 ? e : 1000.0);
#else
  const double e = std::floor(62.0 - std::log2(bound));
  return std::exp2(e < 1000.0 ? e : 1000.0);
#endif
}

} // namespace fixed_point
} // namespace mmops
