#pragma once
// correlation's parameters and index rules, shared by the CPU and CUDA kernels
// (C10_HOST_DEVICE, no ATen).

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {

// Sizes and options of a call (the checks fill them; sizes are -1 while still
// symbolic, meta only).
struct CorrelationParams {
  int64_t batch, channels, height, width; // of input1 and input2
  int64_t kernel_h, kernel_w;
  int64_t max_displacement, patch; // patch = 2 * max_displacement + 1
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;
  int64_t dilation_h, dilation_w;
  int64_t dilation_patch_h, dilation_patch_w;
  int64_t out_h, out_w;
};

namespace correlation_math {

// The offset of displacement `index` (in [0, patch)) along an axis.
C10_HOST_DEVICE inline int64_t displacement(int64_t index, int64_t max_displacement, int64_t dilation_patch) {
  return (index - max_displacement) * dilation_patch;
}

// The input coordinate of tap `i` of output `o` along an axis (may be outside the map).
C10_HOST_DEVICE inline int64_t input_coord(int64_t o, int64_t i, int64_t stride, int64_t pad, int64_t dilation) {
  return o * stride - pad + i * dilation;
}

// The output whose tap `i` falls on input coordinate q, or -1 when none does.
C10_HOST_DEVICE inline int64_t output_coord(int64_t q, int64_t i, int64_t stride, int64_t pad, int64_t dilation,
                                            int64_t out_size) {
  const int64_t num = q + pad - i * dilation;
  if (num < 0 || num % stride != 0) {
    return -1;
  }
  const int64_t o = num / stride;
  return o < out_size ? o : -1;
}

C10_HOST_DEVICE inline bool inside(int64_t v, int64_t size) {
  return v >= 0 && v < size;
}

} // namespace correlation_math
} // namespace mmops
