#pragma once
// tin_shift's parameters and frame rule, shared by the CPU and CUDA kernels
// (C10_HOST_DEVICE, no ATen).

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {

// Sizes of a call (the checks fill them; -1 while still symbolic, meta only).
struct TinShiftParams {
  int64_t batch;          // N
  int64_t frames;         // T
  int64_t channels;       // C
  int64_t positions;      // H * W (the product of the dims after C)
  int64_t groups;         // G, the columns of shift
  int64_t group_channels; // C / G
};

namespace tin_shift_math {

// The frame of the source that frame t of the result holds, when the data
// moves `shift` frames towards later frames (forward; `reverse`: towards
// earlier ones, the backward), or -1 when that frame is outside [0, frames).
// Compared before any subtraction, so that every int64 shift is fine (a
// |shift| >= frames only ever gives -1).
C10_HOST_DEVICE inline int64_t source_frame(int64_t t, int64_t shift, int64_t frames, bool reverse) {
  if (!reverse) {
    return shift <= t && shift > t - frames ? t - shift : -1; // t - shift in [0, frames)
  }
  return shift >= -t && shift < frames - t ? t + shift : -1; // t + shift in [0, frames)
}

} // namespace tin_shift_math
} // namespace mmops
