#pragma once
// Per-level bookkeeping of ms_deform_attn shared by the CPU and CUDA kernels.
// The bilinear sampling itself is bilinear_zero_pad::taps
// (kernels/common/bilinear_zero_pad.h).

#include <c10/macros/Macros.h>

#include "common/bilinear_zero_pad.h"

#include <cstdint>

namespace mmops {
namespace ms_deform_attn_math {

// One level of the flattened value: rows [start, start + height * width) of
// value[b], row-major height x width.
struct Level {
  int64_t start;
  int64_t height;
  int64_t width;
};

// The level (H, W, start) of spatial_shapes / level_start_index, if its rows
// lie inside [0, rows) of value; otherwise an empty level (0 x 0 at row 0),
// whose samples read nothing and are worth 0. Overflow-safe for any int64
// data (the CUDA kernels see unvalidated data outside strict mode).
C10_HOST_DEVICE inline Level make_level(int64_t height, int64_t width, int64_t start, int64_t rows) {
  const bool inside =
      height >= 0 && width >= 0 && start >= 0 && start <= rows && (height == 0 || width <= (rows - start) / height);
  return inside ? Level{start, height, width} : Level{0, 0, 0};
}

// grid_sample(align_corners=False): the normalised coordinate u in [0, 1] of a
// map of `size` pixels lies at pixel u * size - 0.5 (pixel centres at integers).
template <typename T>
C10_HOST_DEVICE inline T pixel_coordinate(T u, int64_t size) {
  return u * static_cast<T>(size) - T(0.5);
}

// Whether neighbour i of a sample takes part in the output or any gradient:
// it lies inside the map and its weight or one of the weight's derivatives is
// nonzero. Only such neighbours are read (a neighbour outside the map has
// offset 0 and zero weights: it is never read).
template <typename T>
C10_HOST_DEVICE inline bool used(const bilinear_zero_pad::Taps<T>& t, int i) {
  return t.weight[i] != T(0) || t.d_dx[i] != T(0) || t.d_dy[i] != T(0);
}

} // namespace ms_deform_attn_math
} // namespace mmops
