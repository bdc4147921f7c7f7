#pragma once
// Polyphase taps of a FIR filter over a zero-inserted signal, shared by
// upfirdn2d and filtered_lrelu (CPU and CUDA, no ATen).
//
// Position pos + k (k in [0, ksize), the flipped filter's tap) of a signal
// zero-inserted by `up` is input[(pos + k) / up] when pos + k is a multiple of
// up (and the index is in [0, in)), else 0. So only the taps k = k0 + j * up
// (j = 0, 1, ...) with k0 = (-pos) mod up read input, at i = i0 + j. FirTaps
// holds that run, clipped to the taps that fall inside the input.

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace fir {

template <typename index_t>
C10_HOST_DEVICE inline index_t floor_div(index_t a, index_t b) { // b > 0
  const index_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

template <typename index_t>
C10_HOST_DEVICE inline index_t floor_mod(index_t a, index_t b) { // b > 0, result in [0, b)
  const index_t r = a % b;
  return r < 0 ? r + b : r;
}

template <typename index_t>
struct FirTaps {
  index_t k0;    // the first tap that reads input (index into the flipped filter)
  index_t i0;    // the input index it reads
  index_t count; // taps k0 + j * up read inputs i0 + j, j in [0, count)
};

// Position pos's first tap that reads input, k0 = (-pos) mod up, and the input
// index it reads, (pos + k0) / up, before any clipping to the input.
template <typename index_t>
struct FirPhase {
  index_t k0, i0;
};

template <typename index_t>
C10_HOST_DEVICE inline FirPhase<index_t> fir_phase(index_t pos, index_t up) {
  const index_t k0 = floor_mod(-pos, up);
  return {k0, floor_div(pos + k0, up)};
}

template <typename index_t>
C10_HOST_DEVICE inline FirTaps<index_t> fir_taps(index_t pos, index_t up, index_t ksize, index_t in) {
  const FirPhase<index_t> phase = fir_phase(pos, up);
  index_t k0 = phase.k0;
  index_t i0 = phase.i0;
  index_t count = k0 < ksize ? (ksize - k0 + up - 1) / up : 0;
  if (i0 < 0) { // skip the taps before the input
    const index_t skip = -i0;
    k0 += skip * up;
    i0 = 0;
    count = count > skip ? count - skip : 0;
  }
  if (i0 + count > in) {
    count = in > i0 ? in - i0 : 0;
  }
  return {k0, i0, count};
}

// A row of `size` samples split by phase of `step` (the CPU kernels' dense
// axpys): samples i = r + q * step of phase r are kept together, q ascending,
// phase r from begin(r).
struct PhaseSplit {
  int64_t size, step;
  C10_HOST_DEVICE int64_t count(int64_t r) const { return r < size ? (size - r + step - 1) / step : 0; }
  C10_HOST_DEVICE int64_t begin(int64_t r) const { // the sum of count(r') for r' < r
    const int64_t whole = size / step, rest = size % step;
    return r * whole + (r < rest ? r : rest);
  }
  C10_HOST_DEVICE int64_t index(int64_t i) const { return begin(i % step) + i / step; } // sample i's place
};

} // namespace fir
} // namespace mmops
