#pragma once
// The per-chunk compaction scan shared by the 3D box kernels that list the
// points inside a box (roiaware_pool3d's assign, roipoint_pool3d's select):
// each (round, warp) of a chunk counts its in-box points into a slot, warp 0
// turns the slots into write offsets.

#include <cstdint>

namespace mmops {
namespace slot_scan {

// Warp 0 of the block: the exclusive prefix of slot[0, kSlots) in place, and
// their sum in *total (written by lane 31).
template <int kSlots>
__device__ inline void exclusive_scan_slots(int32_t* slot, int32_t* total) {
  static_assert(kSlots % 32 == 0, "the slot scan gives each lane the same number of slots");
  constexpr int kPer = kSlots / 32;
  const int lane = threadIdx.x & 31;
  int32_t values[kPer];
  int32_t sum = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    values[k] = slot[lane * kPer + k];
    sum += values[k];
  }
  int32_t inclusive = sum;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int32_t up = __shfl_up_sync(0xffffffffu, inclusive, d);
    inclusive += lane >= d ? up : 0;
  }
  int32_t run = inclusive - sum;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    slot[lane * kPer + k] = run;
    run += values[k];
  }
  if (lane == 31) {
    *total = inclusive;
  }
}

} // namespace slot_scan
} // namespace mmops
