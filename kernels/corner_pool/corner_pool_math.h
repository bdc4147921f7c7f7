#pragma once
// corner_pool's scan rule (CornerNet's corner pooling), shared by the CPU and
// CUDA kernels so that both pick the same position for every output.
//
// Each mode is a running maximum along one axis of [N, C, H, W]:
//   top:    out[h] = max over h' >= h    (scan from H - 1 down to 0)
//   bottom: out[h] = max over h' <= h    (scan from 0 up to H - 1)
//   left:   out[w] = max over w' >= w    (scan from W - 1 down to 0)
//   right:  out[w] = max over w' <= w    (scan from 0 up to W - 1)
// The output is the input value at the position that attains the maximum (the
// argmax), and the gradient of each output goes to that position. The argmax
// of scan step k is the last position (in scan order, so the nearest to the
// output) among steps 0..k whose value is the maximum; a NaN takes over from
// any number and from an earlier NaN, and no number takes over from a NaN:
// once a NaN is in the window the output is NaN and the gradient goes to the
// nearest NaN. This is torch.cummax's rule along the scan order, so the op
// equals mmcv 2.x's composite (cummax of the flipped tensor) bit for bit.
//
// Memory: the kernels see the tensor (contiguous in its suggested memory
// format) as lines: element (o, k, i) at (o * length + k) * inner + i, k the
// pooled axis:
//   NCHW, H axis: outer N * C, length H, inner W
//   NCHW, W axis: outer N * C * H, length W, inner 1
//   NHWC, H axis: outer N, length H, inner W * C
//   NHWC, W axis: outer N * H, length W, inner C

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {

enum class CornerPoolMode { Top = 0, Bottom = 1, Left = 2, Right = 3 };

struct CornerPoolParams {
  CornerPoolMode mode;
  int64_t batch, channels, height, width; // N, C, H, W (-1 while symbolic: meta only)
};

namespace corner_pool_math {

// Whether the mode pools along H (else along W).
C10_HOST_DEVICE inline bool pools_height(CornerPoolMode mode) {
  return mode == CornerPoolMode::Top || mode == CornerPoolMode::Bottom;
}

// Whether the scan runs from the end of the axis towards 0 (top, left).
C10_HOST_DEVICE inline bool scans_backwards(CornerPoolMode mode) {
  return mode == CornerPoolMode::Top || mode == CornerPoolMode::Left;
}

// The lines of a [N, C, H, W] tensor, contiguous (channels_last false) or
// channels_last, for a mode: element (o, k, i) at (o * length + k) * inner + i.
struct Lines {
  int64_t outer, length, inner;
  bool backwards;
};

C10_HOST_DEVICE inline Lines lines_of(const CornerPoolParams& p, bool channels_last) {
  const bool h_axis = pools_height(p.mode);
  Lines l{};
  l.backwards = scans_backwards(p.mode);
  if (channels_last) {
    l.outer = h_axis ? p.batch : p.batch * p.height;
    l.length = h_axis ? p.height : p.width;
    l.inner = h_axis ? p.width * p.channels : p.channels;
  } else {
    l.outer = h_axis ? p.batch * p.channels : p.batch * p.channels * p.height;
    l.length = h_axis ? p.height : p.width;
    l.inner = h_axis ? p.width : 1;
  }
  return l;
}

// Whether `value` (the next one in scan order) takes over the running maximum
// `best` (compared in the accumulate type: exact for float16 / bfloat16).
template <typename T>
C10_HOST_DEVICE inline bool takes_over(T value, T best) {
  // bitwise, not short-circuit: no branches, so CPU loops over lines vectorise
  return (value != value) | ((best == best) & (value >= best));
}

// The running maximum of one line: the raw input value at the argmax (copied
// to the output bit for bit) and its key in the accumulate type `acc_t`.
template <typename scalar_t, typename acc_t>
struct RunningMax {
  scalar_t value;
  acc_t key;

  // Starts with the first value of the line (which then takes over: x >= x).
  C10_HOST_DEVICE inline void start(scalar_t v) {
    value = v;
    key = static_cast<acc_t>(v);
  }

  // Offers the next value in scan order; true when it becomes the argmax.
  C10_HOST_DEVICE inline bool offer(scalar_t v) {
    const acc_t k = static_cast<acc_t>(v);
    const bool take = takes_over(k, key);
    value = take ? v : value;
    key = take ? k : key;
    return take;
  }
};

} // namespace corner_pool_math
} // namespace mmops
