#pragma once
// The math of carafe, shared by the CPU and CUDA kernels (no ATen).
//
// Output pixel (ho, wo) reads the k x k window (zero padded) centred on its
// source pixel (ho / s, wo / s) of its channel's group g = c / (C / G); window
// offset (ky, kx) is weighted by mask channel g * k * k + ky * k + kx at
// (ho, wo). All three passes are gathers: every value is written by one thread.

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace carafe_math {

struct Geometry {
  int64_t height, width;         // features
  int64_t out_height, out_width; // output and masks
  int64_t kernel_size, scale;
  int64_t radius; // (k - 1) / 2

  C10_HOST_DEVICE int64_t taps() const { return kernel_size * kernel_size; }
  C10_HOST_DEVICE int64_t out_plane() const { return out_height * out_width; }
};

inline Geometry make_geometry(int64_t height, int64_t width, int64_t kernel_size, int64_t scale) {
  return Geometry{height, width, height * scale, width * scale, kernel_size, scale, (kernel_size - 1) / 2};
}

// One output value: feature plane `feat` [H, W] of its channel, mask value of
// tap t at mask[t * mask_stride] (a global plane or a shared-memory tile).
template <typename acc_t, typename scalar_t, typename mask_t>
C10_HOST_DEVICE acc_t output_at(const scalar_t* feat, const mask_t* mask, int64_t mask_stride, const Geometry& g,
                                int64_t ho, int64_t wo) {
  const int64_t hs = ho / g.scale - g.radius, ws = wo / g.scale - g.radius;
  acc_t sum = acc_t(0);
  for (int64_t ky = 0; ky < g.kernel_size; ++ky) {
    const int64_t h = hs + ky;
    if (h < 0 || h >= g.height) {
      continue;
    }
    for (int64_t kx = 0; kx < g.kernel_size; ++kx) {
      const int64_t w = ws + kx;
      if (w < 0 || w >= g.width) {
        continue;
      }
      sum +=
          static_cast<acc_t>(feat[h * g.width + w]) * static_cast<acc_t>(mask[(ky * g.kernel_size + kx) * mask_stride]);
    }
  }
  return sum;
}

// Gradient of feature (h, w) of one channel: grad_out [Ho, Wo] of that channel,
// mask [k * k, Ho, Wo] of its group. Output pixels reading (h, w) through tap
// (ky, kx) are the s x s block of source pixel (h + r - ky, w + r - kx).
template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE acc_t grad_feature_at(const scalar_t* grad_out, const scalar_t* mask, const Geometry& g, int64_t h,
                                      int64_t w) {
  const int64_t plane = g.out_plane();
  acc_t sum = acc_t(0);
  for (int64_t ky = 0; ky < g.kernel_size; ++ky) {
    const int64_t hs = h + g.radius - ky;
    if (hs < 0 || hs >= g.height) {
      continue;
    }
    for (int64_t kx = 0; kx < g.kernel_size; ++kx) {
      const int64_t ws = w + g.radius - kx;
      if (ws < 0 || ws >= g.width) {
        continue;
      }
      const scalar_t* m = mask + (ky * g.kernel_size + kx) * plane;
      for (int64_t dy = 0; dy < g.scale; ++dy) {
        const int64_t row = (hs * g.scale + dy) * g.out_width + ws * g.scale;
        for (int64_t dx = 0; dx < g.scale; ++dx) {
          sum += static_cast<acc_t>(grad_out[row + dx]) * static_cast<acc_t>(m[row + dx]);
        }
      }
    }
  }
  return sum;
}

// Gradient of the mask of tap (ky, kx) at output pixel (ho, wo): the sum over
// the group's `channels` of grad_out * the feature that tap read. grad_out and
// feat point at the group's first channel ([channels, Ho, Wo], [channels, H, W]).
template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE acc_t grad_mask_at(const scalar_t* grad_out, const scalar_t* feat, int64_t channels, const Geometry& g,
                                   int64_t tap, int64_t ho, int64_t wo) {
  const int64_t h = ho / g.scale - g.radius + tap / g.kernel_size;
  const int64_t w = wo / g.scale - g.radius + tap % g.kernel_size;
  if (h < 0 || h >= g.height || w < 0 || w >= g.width) {
    return acc_t(0);
  }
  const int64_t in_plane = g.height * g.width, out_plane = g.out_plane();
  const int64_t src = h * g.width + w, dst = ho * g.out_width + wo;
  acc_t sum = acc_t(0);
  for (int64_t c = 0; c < channels; ++c) {
    sum += static_cast<acc_t>(grad_out[c * out_plane + dst]) * static_cast<acc_t>(feat[c * in_plane + src]);
  }
  return sum;
}

} // namespace carafe_math
} // namespace mmops
