#pragma once
// Index math of masked_conv2d shared by the CPU and CUDA kernels (no ATen).

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace masked_conv {

// Row r of the column buffer [C*kh*kw, M] is (channel, tap row, tap column),
// in the order of weight.view(O, C*kh*kw).
struct ColumnRow {
  int64_t channel, i, j;
};

C10_HOST_DEVICE inline ColumnRow column_row(int64_t r, int64_t kernel_h, int64_t kernel_w) {
  const int64_t taps = kernel_h * kernel_w;
  const int64_t tap = r % taps;
  return {r / taps, tap / kernel_w, tap % kernel_w};
}

// The input pixel (y, x) under tap (i, j) of output position (h, w); false
// when it lies in the zero padding.
C10_HOST_DEVICE inline bool tap_source(int64_t h, int64_t w, int64_t i, int64_t j, int64_t stride_h, int64_t stride_w,
                                       int64_t pad_h, int64_t pad_w, int64_t height, int64_t width, int64_t& y,
                                       int64_t& x) {
  y = h * stride_h - pad_h + i;
  x = w * stride_w - pad_w + j;
  return y >= 0 && y < height && x >= 0 && x < width;
}

} // namespace masked_conv
} // namespace mmops
