#pragma once
// Box overlap math shared by nms, batched_nms, soft_nms and bbox_overlaps, on
// CPU and CUDA. Boxes are (x1, y1, x2, y2); T is the compute type (float for
// float/half/bfloat16 inputs, double for double).
//
// Defined results, the same on every device:
//   * area = (x2 - x1 + offset) * (y2 - y1 + offset), as in mmcv (a reversed box
//     has a negative or zero area; no clamping, like mmcv and torchvision);
//   * intersection = max(min(x2) - max(x1) + offset, 0) * (same in y);
//   * base = union (iou) or the first box's area (iof), at least `offset`
//     (mmcv's max(base, offset)); the overlap is intersection / base, and 0 when
//     base is not positive (mmcv divides 0 by 0 there and gets NaN);
//   * a box with a NaN or infinite coordinate overlaps nothing: 0 with every box.
//     box_area marks such a box by returning NaN, which overlap() checks.

#include <c10/macros/Macros.h>

#include "host_device_math.h"

#include <cstdint>
#include <type_traits>

namespace mmops {
namespace box_iou {

// Aligned to its size so that a box moves as one 16-byte (float) or two
// 16-byte (double) vector accesses on the GPU.
template <typename T>
struct alignas(4 * sizeof(T)) Box {
  T x1, y1, x2, y2;
};

// Box i of a [K, 4] array of scalar_t, in the compute type acc_t, and back.
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline Box<acc_t> load_box(const scalar_t* boxes, int64_t i) {
  const scalar_t* q = boxes + i * 4;
  return Box<acc_t>{static_cast<acc_t>(q[0]), static_cast<acc_t>(q[1]), static_cast<acc_t>(q[2]),
                    static_cast<acc_t>(q[3])};
}

template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline void store_box(scalar_t* boxes, int64_t i, const Box<acc_t>& v) {
  boxes[i * 4 + 0] = static_cast<scalar_t>(v.x1);
  boxes[i * 4 + 1] = static_cast<scalar_t>(v.y1);
  boxes[i * 4 + 2] = static_cast<scalar_t>(v.x2);
  boxes[i * 4 + 3] = static_cast<scalar_t>(v.y2);
}

template <typename T>
C10_HOST_DEVICE inline bool is_finite(T v) {
  // v - v is 0 for finite values and NaN for NaN and +-inf.
  return (v - v) == T(0);
}

template <typename T>
C10_HOST_DEVICE inline T min_of(T a, T b) {
  return b < a ? b : a;
}

template <typename T>
C10_HOST_DEVICE inline T max_of(T a, T b) {
  return a < b ? b : a;
}

template <typename T>
C10_HOST_DEVICE inline T quiet_nan() {
  // 0/0 without relying on <limits> in device code.
  T zero = T(0);
  return zero / zero;
}

using host_device_math::mul_rn;

// Area of a box, or NaN when a coordinate is not finite (the box overlaps nothing).
template <typename T>
C10_HOST_DEVICE inline T box_area(const Box<T>& b, T offset) {
  if (!(is_finite(b.x1) && is_finite(b.y1) && is_finite(b.x2) && is_finite(b.y2))) {
    return quiet_nan<T>();
  }
  return mul_rn(b.x2 - b.x1 + offset, b.y2 - b.y1 + offset);
}

template <typename T>
C10_HOST_DEVICE inline T intersection(const Box<T>& a, const Box<T>& b, T offset) {
  const T w = min_of(a.x2, b.x2) - max_of(a.x1, b.x1) + offset;
  const T h = min_of(a.y2, b.y2) - max_of(a.y1, b.y1) + offset;
  return mul_rn(max_of(w, T(0)), max_of(h, T(0)));
}

// Overlap of a and b given their areas from box_area (NaN area: overlap 0).
// iof: intersection over a's area; else intersection over union.
template <typename T>
C10_HOST_DEVICE inline T overlap(const Box<T>& a, const Box<T>& b, T area_a, T area_b, T offset, bool iof) {
  if (!(area_a == area_a) || !(area_b == area_b)) {
    return T(0);
  }
  const T inter = intersection(a, b, offset);
  T base = iof ? area_a : area_a + area_b - inter;
  base = base < offset ? offset : base;
  // `base > 0` is false for NaN (an overflowed area), which then gives 0 too.
  return base > T(0) ? inter / base : T(0);
}

// Gradient of overlap(a, b, ...) times g with respect to both boxes' coordinates,
// ADDED to ga and gb. The pieces of the forward are differentiated as written:
// min/max pass the gradient to the box they pick, a clamped width/height (<= 0)
// or a clamped base passes none, and where the overlap is 0 by definition
// (non-finite box, base <= 0) the gradient is 0.
template <typename T>
C10_HOST_DEVICE inline void overlap_backward(const Box<T>& a, const Box<T>& b, T offset, bool iof, T g, Box<T>& ga,
                                             Box<T>& gb) {
  const T area_a = box_area(a, offset);
  const T area_b = box_area(b, offset);
  if (!(area_a == area_a) || !(area_b == area_b)) {
    return;
  }
  const T wx = min_of(a.x2, b.x2) - max_of(a.x1, b.x1) + offset;
  const T hy = min_of(a.y2, b.y2) - max_of(a.y1, b.y1) + offset;
  const T w = max_of(wx, T(0));
  const T h = max_of(hy, T(0));
  const T inter = w * h;
  const T base_raw = iof ? area_a : area_a + area_b - inter;
  const bool clamped = base_raw < offset;
  const T base = clamped ? offset : base_raw;
  if (!(base > T(0))) {
    return;
  }
  // d overlap = c_inter * d inter + c_area_a * d area_a + c_area_b * d area_b
  const T inv = T(1) / base;
  const T q = clamped ? T(0) : inter * inv * inv;
  const T c_inter = g * (inv + (iof ? T(0) : q));
  const T c_area_a = -g * q;
  const T c_area_b = iof ? T(0) : -g * q;
  // d inter = h * d w + w * d h, w = min(x2) - max(x1) + offset where positive.
  const T dw = wx > T(0) ? c_inter * h : T(0);
  const T dh = hy > T(0) ? c_inter * w : T(0);
  const bool a_x2 = !(b.x2 < a.x2); // min_of(a.x2, b.x2) picked a.x2
  const bool a_y2 = !(b.y2 < a.y2);
  const bool a_x1 = !(a.x1 < b.x1); // max_of(a.x1, b.x1) picked a.x1
  const bool a_y1 = !(a.y1 < b.y1);
  const T aw = a.x2 - a.x1 + offset;
  const T ah = a.y2 - a.y1 + offset;
  const T bw = b.x2 - b.x1 + offset;
  const T bh = b.y2 - b.y1 + offset;
  ga.x1 += (a_x1 ? -dw : T(0)) - c_area_a * ah;
  ga.x2 += (a_x2 ? dw : T(0)) + c_area_a * ah;
  ga.y1 += (a_y1 ? -dh : T(0)) - c_area_a * aw;
  ga.y2 += (a_y2 ? dh : T(0)) + c_area_a * aw;
  gb.x1 += (a_x1 ? T(0) : -dw) - c_area_b * bh;
  gb.x2 += (a_x2 ? T(0) : dw) + c_area_b * bh;
  gb.y1 += (a_y1 ? T(0) : -dh) - c_area_b * bw;
  gb.y2 += (a_y2 ? T(0) : dh) + c_area_b * bw;
}

// IoU with offset 0, the criterion of nms / batched_nms / soft_nms.
template <typename T>
C10_HOST_DEVICE inline T iou(const Box<T>& a, const Box<T>& b, T area_a, T area_b) {
  return overlap(a, b, area_a, area_b, T(0), /*iof=*/false);
}

} // namespace box_iou
} // namespace mmops
