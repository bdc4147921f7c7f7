#pragma once
// Math of soft_nms shared by the CPU and CUDA kernels (the IoU itself:
// kernels/common/box_iou.h).

#include "common/host_device_math.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {

enum class SoftNmsMethod : int64_t { Naive = 0, Linear = 1, Gaussian = 2 };

namespace nms_math {

// The factor a remaining box's score is multiplied by, given its IoU with the
// box just selected: naive 0 and linear 1 - IoU when IoU >= threshold (else 1),
// gaussian exp(-IoU^2 / sigma), in double on both devices (float results then
// agree bitwise between CPU and CUDA).
template <typename T>
C10_HOST_DEVICE inline T soft_nms_weight(SoftNmsMethod method, T iou, T threshold, double sigma) {
  T weight = T(1);
  if (method == SoftNmsMethod::Naive) {
    if (iou >= threshold) {
      weight = T(0);
    }
  } else if (method == SoftNmsMethod::Linear) {
    if (iou >= threshold) {
      weight = T(1) - iou;
    }
  } else {
    const double o = static_cast<double>(iou);
    weight = static_cast<T>(host_device_math::exp_of(-(o * o) / sigma));
  }
  return weight;
}

} // namespace nms_math
} // namespace mmops
