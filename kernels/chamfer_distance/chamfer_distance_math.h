#pragma once
// Math of chamfer_distance shared by the CPU and CUDA kernels.
//
// Nearest-neighbour rule: candidates are scanned in ascending index and one
// replaces the best only when strictly closer, so among equal distances the
// lowest index wins. NaN counts as farther than every number (+inf included):
// a point whose distances are all NaN gets distance NaN and index 0.

#include "common/host_device_math.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace chamfer_distance_math {

// dx^2 + dy^2 with both products rounded (no FMA), so CPU and CUDA agree bitwise.
template <typename acc_t>
C10_HOST_DEVICE inline acc_t squared_distance(acc_t x1, acc_t y1, acc_t x2, acc_t y2) {
  const acc_t dx = x1 - x2, dy = y1 - y2;
  return host_device_math::mul_rn(dx, dx) + host_device_math::mul_rn(dy, dy);
}

// Whether distance d (of a later candidate) replaces best.
template <typename acc_t>
C10_HOST_DEVICE inline bool closer(acc_t d, acc_t best) {
  return d < best || (best != best && d == d);
}

// The running nearest point of one query.
template <typename acc_t>
struct Nearest {
  acc_t dist;
  int32_t index;

  C10_HOST_DEVICE inline void offer(acc_t d, int32_t j) {
    const bool take = index < 0 || closer(d, dist); // a select, not a branch
    dist = take ? d : dist;
    index = take ? j : index;
  }
};

// One term of a point's gradient: the pair (a, b) whose squared distance has
// output gradient g adds 2 g (a - b) to a (and the opposite to b).
template <typename acc_t>
C10_HOST_DEVICE inline void add_pair_grad(acc_t g, acc_t ax, acc_t ay, acc_t bx, acc_t by, acc_t& gx, acc_t& gy) {
  gx += host_device_math::mul_rn(2 * g, ax - bx);
  gy += host_device_math::mul_rn(2 * g, ay - by);
}

// The gradient of point q = b * na + i of set a (a_pts [B, na, 2]): the pair
// (i, idx_a[q]) with gradient g_a[q] (skipped when the index is outside
// [0, nb)), then the pairs (j, i) of set b that chose i, j ascending:
// order[offsets[q], offsets[q + 1]) holds their flat positions b * nb + j.
template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE inline void point_grad(int64_t q, const scalar_t* a_pts, const scalar_t* b_pts, const int32_t* idx_a,
                                       const scalar_t* g_a, const scalar_t* g_b, const int64_t* order,
                                       const int64_t* offsets, int64_t na, int64_t nb, scalar_t* grad_a) {
  const acc_t x = a_pts[2 * q], y = a_pts[2 * q + 1];
  acc_t gx = 0, gy = 0;
  const int64_t j = idx_a[q];
  if (j >= 0 && j < nb) {
    const int64_t r = (q / na) * nb + j;
    add_pair_grad<acc_t>(g_a[q], x, y, b_pts[2 * r], b_pts[2 * r + 1], gx, gy);
  }
  for (int64_t e = offsets[q]; e < offsets[q + 1]; ++e) {
    const int64_t r = order[e];
    add_pair_grad<acc_t>(g_b[r], x, y, b_pts[2 * r], b_pts[2 * r + 1], gx, gy);
  }
  grad_a[2 * q] = static_cast<scalar_t>(gx);
  grad_a[2 * q + 1] = static_cast<scalar_t>(gy);
}

} // namespace chamfer_distance_math
} // namespace mmops
