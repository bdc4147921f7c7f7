#pragma once
// Math of the neighbour queries, shared by the CPU and CUDA kernels: the
// squared distance (products never fused into an FMA, so both devices rank
// points the same), the ball test and the sorted list of the k nearest.
//
// Ranking: by squared distance, ties to the lower index (the list is fed in
// index order and a new point goes after every entry not farther than it);
// a NaN distance ranks after every number, +inf included.

#include "common/host_device_math.h"

#include <c10/macros/Macros.h>

#include <cstdint>
#include <type_traits>

namespace mmops {
namespace neighbors_math {

template <typename T>
C10_HOST_DEVICE inline T squared_distance(T cx, T cy, T cz, T x, T y, T z) {
  using host_device_math::mul_rn;
  const T dx = cx - x, dy = cy - y, dz = cz - z;
  return mul_rn(dx, dx) + mul_rn(dy, dy) + mul_rn(dz, dz);
}

// mmcv's dense ball: the centre itself (d2 == 0) or min2 <= d2 < max2.
template <typename T>
C10_HOST_DEVICE inline bool in_ball(T d2, T min2, T max2) {
  return d2 == T(0) || (d2 >= min2 && d2 < max2);
}

// Whether distance a ranks before distance b (NaN last).
template <typename T>
C10_HOST_DEVICE inline bool closer(T a, T b) {
  return a < b || (b != b && a == a);
}

// The k (<= KMAX) nearest points seen so far, nearest first. All indexing is
// static once the loops unroll, so the CUDA kernels keep the list in registers.
template <int KMAX, typename T>
struct NearestList {
  T dist[KMAX];
  int idx[KMAX];
  int k;
  int count = 0;
  T worst = T(0); // dist[k - 1] once the list is full

  C10_HOST_DEVICE explicit NearestList(int k_) : k(k_) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = 0; i < KMAX; ++i) {
      dist[i] = T(0);
      idx[i] = 0;
    }
  }

  // Offers point j at squared distance d; points come in increasing j.
  C10_HOST_DEVICE inline void offer(T d, int j) {
    if (count == k && !closer(d, worst)) {
      return;
    }
    const int free_slot = count < k ? count : k - 1; // the slot that is (re)filled
    bool placed = false;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = KMAX - 1; i >= 0; --i) {
      if (i <= free_slot && !placed) {
        if (i > 0 && closer(d, dist[i - 1])) {
          dist[i] = dist[i - 1];
          idx[i] = idx[i - 1];
        } else {
          dist[i] = d;
          idx[i] = j;
          placed = true;
        }
      }
      if (i == k - 1) {
        worst = dist[i];
      }
    }
    count += count < k ? 1 : 0;
  }
};

// The most neighbours knn returns (mmcv allows fewer than 100).
constexpr int64_t kMaxK = 100;

// Calls fn(std::integral_constant<int, KMAX>{}) with the smallest list capacity
// that holds k (1 <= k <= kMaxK): the lists of the common k stay small.
template <typename Fn>
inline void with_capacity(int64_t k, Fn&& fn) {
  if (k <= 3) {
    fn(std::integral_constant<int, 3>{});
  } else if (k <= 16) {
    fn(std::integral_constant<int, 16>{});
  } else if (k <= 32) {
    fn(std::integral_constant<int, 32>{});
  } else {
    fn(std::integral_constant<int, static_cast<int>(kMaxK)>{});
  }
}

// The batch of stacked item m given the inclusive prefix sums of the counts
// (ends[b] = count[0] + ... + count[b]): the first b with m < ends[b]; B when
// m is past the counted total.
C10_HOST_DEVICE inline int64_t batch_of(int64_t m, const int64_t* ends, int64_t batches) {
  int64_t lo = 0, hi = batches;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (m < ends[mid]) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The points [start, start + count) of batch b among `total` stacked points,
// clamped into [0, total) (unchecked counts on CUDA); empty when b is past the
// last batch.
struct Segment {
  int64_t start;
  int64_t count;
};

C10_HOST_DEVICE inline Segment segment_of(int64_t b, const int64_t* ends, int64_t batches, int64_t total) {
  if (b >= batches) {
    return {0, 0};
  }
  const auto clamp = [total](int64_t v) { return v < 0 ? int64_t(0) : (v > total ? total : v); };
  const int64_t start = clamp(b == 0 ? 0 : ends[b - 1]);
  const int64_t end = clamp(ends[b]);
  return {start, end > start ? end - start : 0};
}

} // namespace neighbors_math
} // namespace mmops
