#pragma once
// Math of assign_score_withk shared by the CPU and CUDA kernels. Layouts
// (contiguous): scores [B, Q, M] with Q = npoint * K (pair q = n * K + k),
// point / center features [B, N, M, O], knn [B, Q], the output gradient
// transposed to [B, Q, O]. A pair r = b * Q + q is valid when its neighbour
// knn[r] and its center knn[r - k] both lie in [0, N); an invalid pair adds
// nothing anywhere (CUDA's guard; the CPU rejects such indices first).
// Sums run in a fixed order (m, o or the pairs ascending): deterministic.

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace assign_score_withk_math {

struct Sizes {
  int64_t q; // npoint * K
  int64_t k; // K
  int64_t n; // N
  int64_t m; // M
  int64_t o; // O
};

template <typename Params>
C10_HOST_DEVICE inline Sizes sizes_of(const Params& p) {
  return {p.centers * p.k, p.k, p.points, p.weights, p.out_dim};
}

template <typename index_t>
C10_HOST_DEVICE inline bool in_range(index_t v, int64_t n) {
  return v >= 0 && static_cast<int64_t>(v) < n;
}

// Pair r = b * Q + q, q = n * K + k (the divisions done once by the caller).
struct Pair {
  int64_t r, b, k;
};

C10_HOST_DEVICE inline Pair pair_of(int64_t r, const Sizes& s) {
  const int64_t b = r / s.q;
  return {r, b, (r - b * s.q) % s.k};
}

// Offsets (in [B, N, M, O] elements) of the pair's neighbour and center rows, or false.
template <typename index_t>
C10_HOST_DEVICE inline bool pair_rows(const index_t* knn, const Pair& pair, const Sizes& s, int64_t& point_row,
                                      int64_t& center_row) {
  const index_t kn = knn[pair.r], cn = knn[pair.r - pair.k];
  if (!in_range(kn, s.n) || !in_range(cn, s.n)) {
    return false;
  }
  point_row = ((pair.b * s.n) + kn) * s.m * s.o;
  center_row = ((pair.b * s.n) + cn) * s.m * s.o;
  return true;
}

// sum_{i < count} weights[i] * (point[at + i * step] - center[at + i * step]) over the
// feature rows of the pair (flattened [M, O]), or 0 for an invalid pair.
template <typename acc_t, typename scalar_t, typename index_t>
C10_HOST_DEVICE inline acc_t weighted_difference(const scalar_t* weights, const scalar_t* points,
                                                 const scalar_t* centers, const index_t* knn, const Pair& pair,
                                                 int64_t at, int64_t step, int64_t count, const Sizes& s) {
  int64_t pr = 0, cr = 0;
  if (!pair_rows(knn, pair, s, pr, cr)) {
    return acc_t(0);
  }
  acc_t sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t e = at + i * step;
    sum += static_cast<acc_t>(weights[i]) * (static_cast<acc_t>(points[pr + e]) - static_cast<acc_t>(centers[cr + e]));
  }
  return sum;
}

// output value (pair, channel o): sum_m scores[r, m] * (point[m, o] - center[m, o]).
template <typename acc_t, typename scalar_t, typename index_t>
C10_HOST_DEVICE inline acc_t pair_output(const scalar_t* scores, const scalar_t* points, const scalar_t* centers,
                                         const index_t* knn, const Pair& pair, int64_t o, const Sizes& s) {
  return weighted_difference<acc_t>(scores + pair.r * s.m, points, centers, knn, pair, o, s.o, s.m, s);
}

// grad of scores[r, m]: sum_o grad[r, o] * (point[m, o] - center[m, o]).
template <typename acc_t, typename scalar_t, typename index_t>
C10_HOST_DEVICE inline acc_t score_grad(const scalar_t* grad_t, const scalar_t* points, const scalar_t* centers,
                                        const index_t* knn, const Pair& pair, int64_t m, const Sizes& s) {
  return weighted_difference<acc_t>(grad_t + pair.r * s.o, points, centers, knn, pair, m * s.o, 1, s.o, s);
}

// grad of point_features[b, v, m, o] (row = b * N + v): the valid pairs that chose v
// as neighbour (order[offsets[row], offsets[row + 1]): their r, ascending; the
// segments leave out pairs with an invalid center), sum of scores[r, m] * grad[r, o].
template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE inline acc_t point_grad(const scalar_t* grad_t, const scalar_t* scores, const int64_t* order,
                                        const int64_t* offsets, int64_t row, int64_t m, int64_t o, const Sizes& s) {
  acc_t sum = 0;
  for (int64_t e = offsets[row]; e < offsets[row + 1]; ++e) {
    const int64_t r = order[e];
    sum += static_cast<acc_t>(scores[r * s.m + m]) * static_cast<acc_t>(grad_t[r * s.o + o]);
  }
  return sum;
}

// grad of center_features[b, v, m, o]: the centers c = b * npoint + n with
// knn[b, n, 0] = v (order[offsets[row], offsets[row + 1]), ascending), minus
// the sum over their K pairs r = c * K + k of scores[r, m] * grad[r, o].
template <typename acc_t, typename scalar_t, typename index_t>
C10_HOST_DEVICE inline acc_t center_grad(const scalar_t* grad_t, const scalar_t* scores, const index_t* knn,
                                         const int64_t* order, const int64_t* offsets, int64_t row, int64_t m,
                                         int64_t o, const Sizes& s) {
  acc_t sum = 0;
  for (int64_t e = offsets[row]; e < offsets[row + 1]; ++e) {
    const int64_t first = order[e] * s.k;
    for (int64_t r = first; r < first + s.k; ++r) {
      if (in_range(knn[r], s.n)) {
        sum += static_cast<acc_t>(scores[r * s.m + m]) * static_cast<acc_t>(grad_t[r * s.o + o]);
      }
    }
  }
  return -sum;
}

} // namespace assign_score_withk_math
} // namespace mmops
