#pragma once
// Math of pixel_group shared by the CPU and CUDA kernels, rounded as mmcv's
// float32 kernel rounds it, so that both devices claim the same pixels.

#include "common/host_device_math.h"

#include <c10/macros/Macros.h>

#include <cstdint>
#include <type_traits>

namespace mmops {
namespace pixel_group_math {

// dis + diff^2 as mmcv computes `float dis; dis += pow(diff, 2)`: the square
// in double (exact for a float diff), the sum in double, rounded to float. In
// double (float64 inputs) the usual double operations.
template <typename acc_t>
C10_HOST_DEVICE inline acc_t add_square(acc_t dis, acc_t diff) {
  if constexpr (std::is_same_v<acc_t, float>) {
    const double d = static_cast<double>(diff);
    return static_cast<float>(static_cast<double>(dis) + host_device_math::mul_rn(d, d));
  } else {
    return dis + host_device_math::mul_rn(diff, diff);
  }
}

// Whether the embedding e (channels apart by `stride`) lies within the squared
// threshold of the kernel vector kv: mmcv's loop, which stops once the sum
// reaches the threshold (so a NaN in a later channel does not count) and
// claims the pixel unless the sum is >= the threshold (a NaN sum claims it).
template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE inline bool within_distance(const acc_t* kv, const scalar_t* e, int64_t channels,
                                            acc_t threshold_square) {
  acc_t dis = 0;
  for (int64_t c = 0; c < channels; ++c) {
    dis = add_square<acc_t>(dis, kv[c] - static_cast<acc_t>(e[c]));
    if (dis >= threshold_square) {
      return false;
    }
  }
  return !(dis >= threshold_square);
}

// A pixel count as mmcv's float counter holds it (`count += 1` stops growing
// at 2^24 in float); exact in double.
template <typename acc_t>
C10_HOST_DEVICE inline acc_t counted(int64_t n) {
  if constexpr (std::is_same_v<acc_t, float>) {
    return static_cast<float>(n < (int64_t{1} << 24) ? n : (int64_t{1} << 24));
  } else {
    return static_cast<acc_t>(n);
  }
}

} // namespace pixel_group_math
} // namespace mmops
