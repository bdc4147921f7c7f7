#pragma once
// Bilinear sampling of an H x W map with zero padding, as in deformable
// convolution and grid_sample(padding_mode="zeros", align_corners=False) once
// the coordinate is in pixel units. Shared by the CPU and CUDA kernels of
// deform_conv2d and ms_deform_attn.
//
// Semantics: a sample at (y, x) is worth 0 unless -1 < y < H and -1 < x < W
// (a non-finite coordinate is worth 0 too); otherwise it blends its four
// neighbours floor/floor+1 with the usual weights, a neighbour outside the map
// counting as 0. The derivatives of the weights with respect to y and x give
// the coordinate gradient (zero for a sample worth 0).

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"

#include <cstdint>

namespace mmops {
namespace bilinear_zero_pad {

// The four neighbours in the order (y0,x0), (y0,x1), (y1,x0), (y1,x1).
template <typename T>
struct Taps {
  int64_t offset[4]; // y * W + x; 0 for a neighbour outside the map (weight 0)
  T weight[4];       // 0 for a neighbour outside the map
  T d_dy[4];         // d weight / d y
  T d_dx[4];         // d weight / d x
  bool any;          // false: every weight is 0 (sample outside or not finite)
};

template <typename T>
C10_HOST_DEVICE inline Taps<T> taps(T y, T x, int64_t height, int64_t width) {
  Taps<T> t;
  for (int i = 0; i < 4; ++i) {
    t.offset[i] = 0;
    t.weight[i] = T(0);
    t.d_dy[i] = T(0);
    t.d_dx[i] = T(0);
  }
  t.any = y > T(-1) && y < static_cast<T>(height) && x > T(-1) && x < static_cast<T>(width);
  if (!t.any) {
    return t; // also NaN
  }
  const T y_floor = host_device_math::floor_of(y);
  const T x_floor = host_device_math::floor_of(x);
  const int64_t y0 = static_cast<int64_t>(y_floor);
  const int64_t x0 = static_cast<int64_t>(x_floor);
  const T fy = y - y_floor; // weight of row y0 + 1
  const T fx = x - x_floor; // weight of column x0 + 1
  const T gy = T(1) - fy;
  const T gx = T(1) - fx;
  const bool row_in[2] = {y0 >= 0, y0 + 1 < height};
  const bool col_in[2] = {x0 >= 0, x0 + 1 < width};
  const T wy[2] = {gy, fy};
  const T wx[2] = {gx, fx};
  const T sign[2] = {T(-1), T(1)}; // d wy / dy and d wx / dx
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 2; ++c) {
      const int i = r * 2 + c;
      if (row_in[r] && col_in[c]) {
        t.offset[i] = (y0 + r) * width + (x0 + c);
        t.weight[i] = wy[r] * wx[c];
        t.d_dy[i] = sign[r] * wx[c];
        t.d_dx[i] = wy[r] * sign[c];
      }
    }
  }
  return t;
}

} // namespace bilinear_zero_pad
} // namespace mmops
