#pragma once
// Math of three_interpolate shared by the CPU and CUDA kernels: the weighted
// sum of 3 features in a fixed order, products never fused into an FMA, so
// both devices give the same bits. Indices outside [0, m) are skipped.

#include "common/host_device_math.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace three_interpolate_math {

C10_HOST_DEVICE inline bool valid_index(int32_t i, int64_t m) {
  return i >= 0 && i < m;
}

// sum_j w[j] * row[idx[j]] for one target (idx, w: its 3 entries), in acc_t.
template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE inline acc_t interpolate3(const scalar_t* row, int64_t m, const int32_t* idx, const scalar_t* w) {
  acc_t out = acc_t(0);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int j = 0; j < 3; ++j) {
    if (valid_index(idx[j], m)) {
      out += host_device_math::mul_rn(static_cast<acc_t>(w[j]), static_cast<acc_t>(row[idx[j]]));
    }
  }
  return out;
}

} // namespace three_interpolate_math
} // namespace mmops
