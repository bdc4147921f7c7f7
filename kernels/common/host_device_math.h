#pragma once
// Scalar math wrappers for code that is compiled for both the host and the
// device (C10_HOST_DEVICE): the CUDA math function in device code, the std::
// one on the host. T is the compute type (float or double).

#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>

namespace mmops {
namespace host_device_math {

template <typename T>
C10_HOST_DEVICE inline bool is_finite(T v) {
#ifdef __CUDA_ARCH__
  return isfinite(v);
#else
  return std::isfinite(v);
#endif
}

template <typename T>
C10_HOST_DEVICE inline T round_away(T v) {
#ifdef __CUDA_ARCH__
  return round(v);
#else
  return std::round(v);
#endif
}

template <typename T>
C10_HOST_DEVICE inline T floor_of(T v) {
#ifdef __CUDA_ARCH__
  return floor(v);
#else
  return std::floor(v);
#endif
}

template <typename T>
C10_HOST_DEVICE inline T ceil_of(T v) {
#ifdef __CUDA_ARCH__
  return ceil(v);
#else
  return std::ceil(v);
#endif
}

template <typename T>
C10_HOST_DEVICE inline T exp_of(T v) {
#ifdef __CUDA_ARCH__
  return exp(v);
#else
  return std::exp(v);
#endif
}

template <typename T>
C10_HOST_DEVICE inline T log_of(T v) {
#ifdef __CUDA_ARCH__
  return log(v);
#else
  return std::log(v);
#endif
}

template <typename T>
C10_HOST_DEVICE inline T log1p_of(T v) {
#ifdef __CUDA_ARCH__
  return log1p(v);
#else
  return std::log1p(v);
#endif
}

template <typename T>
C10_HOST_DEVICE inline T pow_of(T base, T e) {
#ifdef __CUDA_ARCH__
  return pow(base, e);
#else
  return std::pow(base, e);
#endif
}

// Index of the image a roi belongs to (rois[k, 0]), or -1 if the value is not
// in [0, batch_size).
template <typename T>
C10_HOST_DEVICE inline int64_t batch_index(T value, int64_t batch_size) {
  if (!(value >= T(0) && value < static_cast<T>(batch_size))) {
    return -1;  // also NaN
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
  C10_HOST_DEVICE inline T result() const {
    return index < 0 ? T(0) : best;
  }
};

} // namespace host_device_math
} // namespace mmops
