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

template <typename index_t>
C10_HOST_DEVICE inline FirTaps<index_t> fir_taps(index_t pos, index_t up, index_t ksize, index_t in) {
  index_t k0 = floor_mod(-pos, up);
  index_t i0 = floor_div(pos + k0, up);
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

} // namespace fir
} // namespace mmops
