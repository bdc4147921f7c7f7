#pragma once
// Device side of common/fixed_point.h: the add and the conversion kernel.

#include "common/fixed_point.h"

#include <cstdint>

namespace mmops {
namespace fixed_point {

// sum += round(value * scale), two's complement: adding the unsigned image of
// a negative value subtracts.
__device__ inline void fixed_point_add(int64_t* sum, double value, double scale) {
  atomicAdd(reinterpret_cast<unsigned long long*>(sum), static_cast<unsigned long long>(llrint(value * scale)));
}

// out[i] = sums[i] / scale (NaN everywhere when the scale is not finite).
// max_abs: one value on the device (float or double), as the adds used it.
template <typename scalar_t, typename max_t>
__global__ void fixed_point_to_value_kernel(const int64_t* __restrict__ sums, scalar_t* __restrict__ out, int64_t n,
                                            const max_t* __restrict__ max_abs, double adds_bound) {
  const double scale = fixed_point_scale(static_cast<double>(*max_abs), adds_bound);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = static_cast<scalar_t>(isfinite(scale) ? static_cast<double>(sums[i]) / scale : NAN);
  }
}

} // namespace fixed_point
} // namespace mmops
