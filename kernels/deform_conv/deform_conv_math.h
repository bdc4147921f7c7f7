#pragma once
// Math of deformable convolution shared by the CPU and CUDA kernels: where a
// kernel tap samples, the layouts of offset / mask / column buffers. The
// bilinear interpolation itself is kernels/common/bilinear_zero_pad.h.
//
// Tap k = i * kw + j of output pixel (ho, wo), deform group dg, samples
//   y = ho * stride_h - pad_h + i * dilation_h + offset[n, (dg*kh*kw + k)*2 + 0, ho, wo]
//   x = wo * stride_w - pad_w + j * dilation_w + offset[n, (dg*kh*kw + k)*2 + 1, ho, wo]
// with zero-padded bilinear interpolation, times mask[n, dg*kh*kw + k, ho, wo]
// (DCNv2; 1 for DCNv1). Input channel c belongs to deform group c / (C / deform_groups).

#include "common/bilinear_zero_pad.h"
#include "deform_conv/deform_conv_kernels.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace deform_conv_math {

// Index of the dy value of (n, dg, k) at output pixel hw = ho * W_out + wo;
// dx is `plane` (= H_out * W_out) further.
C10_HOST_DEVICE inline int64_t offset_index(int64_t n, int64_t dg, int64_t k, int64_t hw, int64_t deform_groups,
                                            int64_t taps, int64_t plane) {
  return ((n * deform_groups + dg) * taps + k) * 2 * plane + hw;
}

C10_HOST_DEVICE inline int64_t mask_index(int64_t n, int64_t dg, int64_t k, int64_t hw, int64_t deform_groups,
                                          int64_t taps, int64_t plane) {
  return ((n * deform_groups + dg) * taps + k) * plane + hw;
}

// Column (within one output pixel's K values) of input channel c of conv group g at tap k:
// (group, tap, channel in group) order.
C10_HOST_DEVICE inline int64_t column(int64_t c, int64_t g, int64_t k, int64_t taps, int64_t channels_per_group) {
  return (g * taps + k) * channels_per_group + (c - g * channels_per_group);
}

// One kernel tap's sample: the bilinear neighbours and the mask value.
template <typename T>
struct TapSample {
  bilinear_zero_pad::Taps<T> taps;
  T mask; // 1 without a mask
};

// acc_t: the compute type (float for float/half/bfloat16, double for double).
// offset / mask point at the whole batch; mask may be null.
template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE inline TapSample<acc_t> tap_sample(const scalar_t* offset, const scalar_t* mask, int64_t n, int64_t dg,
                                                   int64_t k, int64_t ho, int64_t wo, const DeformConvParams& p,
                                                   int64_t height, int64_t width) {
  const int64_t taps = p.kernel_h * p.kernel_w;
  const int64_t plane = p.out_h * p.out_w;
  const int64_t hw = ho * p.out_w + wo;
  // 32-bit division: k < kh * kw (64-bit division is slow on the GPU).
  const int64_t i = static_cast<int32_t>(k) / static_cast<int32_t>(p.kernel_w);
  const int64_t j = k - i * p.kernel_w;
  const int64_t o = offset_index(n, dg, k, hw, p.deform_groups, taps, plane);
  const acc_t dy = static_cast<acc_t>(offset[o]);
  const acc_t dx = static_cast<acc_t>(offset[o + plane]);
  const acc_t y = static_cast<acc_t>(ho * p.stride_h - p.pad_h + i * p.dilation_h) + dy;
  const acc_t x = static_cast<acc_t>(wo * p.stride_w - p.pad_w + j * p.dilation_w) + dx;
  TapSample<acc_t> s;
  s.taps = bilinear_zero_pad::taps<acc_t>(y, x, height, width);
  s.mask =
      mask != nullptr ? static_cast<acc_t>(mask[mask_index(n, dg, k, hw, p.deform_groups, taps, plane)]) : acc_t(1);
  return s;
}

// Whether neighbour t of a sample takes part in the coordinate gradient (it is
// inside the map; a neighbour outside has weight and derivatives 0).
template <typename T>
C10_HOST_DEVICE inline bool touches(const bilinear_zero_pad::Taps<T>& taps, int t) {
  return taps.weight[t] != T(0) || taps.d_dy[t] != T(0) || taps.d_dx[t] != T(0);
}

} // namespace deform_conv_math
} // namespace mmops
