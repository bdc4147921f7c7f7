#pragma once
// Scalar math wrappers for code that is compiled for both the host and the
// device (C10_HOST_DEVICE): the CUDA math function in device code, the std::
// one on the host. T is the compute type (float or double).

#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace mmops {
namespace host_device_math {

// The math function `fn` by the name CUDA gives it in device code, std::fn on the host.
#ifdef __CUDA_ARCH__
#define MMOPS_HOST_DEVICE_FN(fn) fn
#else
#define MMOPS_HOST_DEVICE_FN(fn) std::fn
#endif

template <typename T>
C10_HOST_DEVICE inline bool is_finite(T v) {
  return MMOPS_HOST_DEVICE_FN(isfinite)(v);
}

template <typename T>
C10_HOST_DEVICE inline T pow_of(T base, T e) {
  return MMOPS_HOST_DEVICE_FN(pow)(base, e);
}

template <typename T>
C10_HOST_DEVICE inline T atan2_of(T y, T x) {
  return MMOPS_HOST_DEVICE_FN(atan2)(y, x);
}

// name(v) = fn(v) for the unary functions.
#define MMOPS_UNARY_HOST_DEVICE_FN(name, fn) \
  template <typename T>                      \
  C10_HOST_DEVICE inline T name(T v) {       \
    return MMOPS_HOST_DEVICE_FN(fn)(v);      \
  }
MMOPS_UNARY_HOST_DEVICE_FN(round_away, round)
MMOPS_UNARY_HOST_DEVICE_FN(floor_of, floor)
MMOPS_UNARY_HOST_DEVICE_FN(ceil_of, ceil)
MMOPS_UNARY_HOST_DEVICE_FN(exp_of, exp)
MMOPS_UNARY_HOST_DEVICE_FN(expm1_of, expm1)
MMOPS_UNARY_HOST_DEVICE_FN(log_of, log)
MMOPS_UNARY_HOST_DEVICE_FN(log1p_of, log1p)
MMOPS_UNARY_HOST_DEVICE_FN(sin_of, sin)
MMOPS_UNARY_HOST_DEVICE_FN(cos_of, cos)
MMOPS_UNARY_HOST_DEVICE_FN(tanh_of, tanh)
MMOPS_UNARY_HOST_DEVICE_FN(sqrt_of, sqrt)
MMOPS_UNARY_HOST_DEVICE_FN(abs_of, fabs)
#undef MMOPS_UNARY_HOST_DEVICE_FN
#undef MMOPS_HOST_DEVICE_FN

// a * b rounded once, never fused into a neighbouring add (nvcc contracts
// a * b + c into an FMA by default; the host compiler, in ISO C++ mode, does
// not): CPU and CUDA then compute bitwise the same value from the same inputs.
template <typename T>
C10_HOST_DEVICE inline T mul_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) {
    return __fmul_rn(a, b);
  } else if constexpr (std::is_same_v<T, double>) {
    return __dmul_rn(a, b);
  } else {
    return a * b;
  }
#else
  return a * b;
#endif
}

// Index of the image a roi belongs to (rois[k, 0]), or -1 if the value is not
// in [0, batch_size).
template <typename T>
C10_HOST_DEVICE inline int64_t batch_index(T value, int64_t batch_size) {
  if (!(value >= T(0) && value < static_cast<T>(batch_size))) {
    return -1; // also NaN
  }
  return static_cast<int64_t>(value);
}

// Running maximum of a sequence of values (a pooling bin's samples or pixels).
// The first maximum wins ties; a NaN wins and sticks (as torch.amax
// propagates NaN). index: the position of the maximum in the caller's
// numbering; -1 while nothing was seen (result 0).
template <typename T>
struct MaxTracker {
  T best = T(0);
  int index = -1;
  C10_HOST_DEVICE inline void update(T value, int position) {
    // Branch-free select: the winner of a bin is data-dependent, so a branch
    // would mispredict about half the time.
    const bool take = index < 0 || value > best || (value != value && best == best);
    best = take ? value : best;
    index = take ? position : index;
  }
  C10_HOST_DEVICE inline T result() const { return index < 0 ? T(0) : best; }
};

} // namespace host_device_math
} // namespace mmops
