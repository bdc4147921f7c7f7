#pragma once
// psa_mask index math (PSANet's point-wise spatial attention masks), shared by
// the CPU and CUDA kernels.
//
// input [N, mask_h * mask_w, H, W]: for every source pixel (h, w), a mask of
// mask_h x mask_w attention values centred on it (centre (half_h, half_w),
// half = (mask - 1) / 2, as mmcv). Mask entry (i, j) of pixel (h, w) belongs
// to the target pixel (y, x) = (h + i - half_h, w + j - half_w).
// output [N, H * W, H, W], zero where no mask entry lands:
//   collect:    output[n, y * W + x, h, w] = input[n, i * mask_w + j, h, w]
//   distribute: output[n, h * W + w, y, x] = input[n, i * mask_w + j, h, w]
// Every output element takes at most one input element and every input element
// inside the map goes to exactly one output element, so forward and backward
// are both gathers (no atomics, exact in every dtype).

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {

enum class PsaType { Collect = 0, Distribute = 1 };

struct PsaMaskParams {
  int64_t batch, height, width; // N, H, W
  int64_t mask_h, mask_w;       // the input has mask_h * mask_w channels
  PsaType type;
};

namespace psa_mask_math {

// The input channel that output element (a, b, c) of one image takes (a = ay *
// W + ax: the output channel, (b, c) its pixel), or -1 (the element is 0);
// *src_pixel is then the source pixel h * W + w.
C10_HOST_DEVICE inline int64_t source_of_split(int64_t ay, int64_t ax, int64_t b, int64_t c, int64_t width,
                                               int64_t mask_h, int64_t mask_w, bool collect, int64_t* src_pixel) {
  // collect: a is the target (y, x), (b, c) the source (h, w); distribute: the reverse.
  const int64_t y = collect ? ay : b, x = collect ? ax : c;
  const int64_t h = collect ? b : ay, w = collect ? c : ax;
  const int64_t i = y - h + (mask_h - 1) / 2;
  const int64_t j = x - w + (mask_w - 1) / 2;
  if (i < 0 || i >= mask_h || j < 0 || j >= mask_w) {
    return -1;
  }
  *src_pixel = h * width + w;
  return i * mask_w + j;
}

C10_HOST_DEVICE inline int64_t source_of(int64_t a, int64_t b, int64_t c, int64_t height, int64_t width, int64_t mask_h,
                                         int64_t mask_w, bool collect, int64_t* src_pixel) {
  const int64_t ay = a / width;
  return source_of_split(ay, a - ay * width, b, c, width, mask_h, mask_w, collect, src_pixel);
}

// The output element (of one image, as a flat index into [H * W, H, W]) that
// input element (k = i * mask_w + j, h, w) goes to, or -1 when its target lies
// outside the map (its gradient is then 0).
C10_HOST_DEVICE inline int64_t target_of_split(int64_t i, int64_t j, int64_t h, int64_t w, int64_t height,
                                               int64_t width, int64_t half_h, int64_t half_w, bool collect) {
  const int64_t y = h + i - half_h, x = w + j - half_w;
  if (y < 0 || y >= height || x < 0 || x >= width) {
    return -1;
  }
  const int64_t plane = height * width;
  return collect ? (y * width + x) * plane + h * width + w : (h * width + w) * plane + y * width + x;
}

C10_HOST_DEVICE inline int64_t target_of(int64_t k, int64_t h, int64_t w, int64_t height, int64_t width, int64_t mask_w,
                                         int64_t half_h, int64_t half_w, bool collect) {
  const int64_t i = k / mask_w;
  return target_of_split(i, k - i * mask_w, h, w, height, width, half_h, half_w, collect);
}

} // namespace psa_mask_math
} // namespace mmops
