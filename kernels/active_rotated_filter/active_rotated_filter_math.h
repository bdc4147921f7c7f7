#pragma once
// The index tables of active_rotated_filter, shared by the CPU and CUDA kernels.
//
// mmcv's rule: weight entry l (of E = orientations * kH * kW) of every
// (out plane, in plane) goes, for rotation k, to entry indices[l, k] - 1 of
// output block (out plane, k, in plane). mmops runs it as a gather through two
// int32 tables built from indices:
//   target[l * R + k] = indices[l, k] - 1, or -1 when the value is outside [1, E];
//   source[k * E + m] = the largest l with target[l * R + k] == m, or -1
// (the largest l: the last writer of mmcv's CPU loop). An output entry without
// a source is 0; an out-of-range index writes nowhere (CUDA's guard; CPU rejects it).
// The gradient of input entry l sums, over k, the output entries it is the source of.

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace active_rotated_filter_math {

template <typename index_t>
C10_HOST_DEVICE inline int32_t target_of(index_t value, int64_t entries) {
  const int64_t v = static_cast<int64_t>(value);
  return v >= 1 && v <= entries ? static_cast<int32_t>(v - 1) : -1;
}

// The target m of entry l for one rotation when l is its source (source_k = source + k * E), else -1:
// the output entry the gradient of l is read from.
C10_HOST_DEVICE inline int32_t won_target(int32_t m, const int32_t* source_k, int32_t l) {
  return m >= 0 && source_k[m] == l ? m : -1;
}

} // namespace active_rotated_filter_math
} // namespace mmops
