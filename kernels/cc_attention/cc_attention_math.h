#pragma once
// Criss-cross attention index math (CCNet; mmcv's ca_weight / ca_map), shared
// by the CPU and CUDA kernels.
//
// Every pixel (y, x) of an H x W map attends to the L = H + W - 1 pixels of its
// criss-cross: its row and its column, itself counted once. Entry k of the
// energy / attention axis names the pixel pos(k; y, x):
//   k < W:           (y, k)  the row, left to right (k == x: the pixel itself)
//   k = W + i < L:   (j, x)  the column without row y, top to bottom:
//                            j = i for i < y, j = i + 1 for i >= y
// (mmcv 1.x's layout; mmcv 2.x's module orders [column with itself masked,
// row], which gives the same softmax and output.)
//
//   ca_weight(t, f)[n, k, y, x] = sum_c t[n, c, y, x] * f[n, c, pos(k; y, x)]
//   ca_map(a, g)[n, c, y, x]    = sum_k a[n, k, y, x] * g[n, c, pos(k; y, x)]
//
// Their gradients are the same three products:
//   energy(t, f)     = ca_weight(t, f)                        [N, L, H, W]
//   aggregate(a, g)  = ca_map(a, g)                           [N, C, H, W]
//   transpose(a)[n, k, y, x] = a[n, k', pos(k; y, x)] where pos(k'; pos(k; y, x)) = (y, x):
//                    the weight that the criss-cross pixel gives back to (y, x)
// d ca_weight: dt = aggregate(dE, f), df = aggregate(transpose(dE), t);
// d ca_map:    da = energy(dout, g),  dg = aggregate(transpose(a), dout).

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {

struct CcAttentionParams {
  int64_t batch, channels, height, width; // N, C, H, W of the [N, C, H, W] maps
  int64_t length() const {                // L = H + W - 1 (H + W >= 1 is checked)
    return height + width - 1;
  }
};

namespace cc_attention_math {

// The row j of column entry i (k = W + i) of a pixel in row y.
C10_HOST_DEVICE inline int64_t column_row(int64_t i, int64_t y) {
  return i < y ? i : i + 1;
}

// The column entry i of row j (j != y) for a pixel in row y: column_row's inverse.
C10_HOST_DEVICE inline int64_t column_entry(int64_t j, int64_t y) {
  return j < y ? j : j - 1;
}

} // namespace cc_attention_math
} // namespace mmops
