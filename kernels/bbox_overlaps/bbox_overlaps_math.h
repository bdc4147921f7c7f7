#pragma once
// Per-element steps of bbox_overlaps shared by the CPU and CUDA kernels; the
// overlap math itself (shared with nms) is kernels/common/box_iou.h.
// scalar_t: the boxes' dtype; acc_t: the compute type (float for
// float/half/bfloat16, double for double).

#include "common/box_iou.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {
namespace bbox_overlaps_math {

using box_iou::Box;
using box_iou::load_box;
using box_iou::store_box;

// Aligned mode: the overlap of row i of b1 with row i of b2.
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline scalar_t aligned_overlap(const scalar_t* b1, const scalar_t* b2, int64_t i, acc_t offset,
                                                bool iof) {
  const Box<acc_t> a = load_box<scalar_t, acc_t>(b1, i);
  const Box<acc_t> b = load_box<scalar_t, acc_t>(b2, i);
  return static_cast<scalar_t>(
      box_iou::overlap(a, b, box_iou::box_area(a, offset), box_iou::box_area(b, offset), offset, iof));
}

// Aligned mode: the gradients of row i of both sets (grad: [M]) into g1 and g2.
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline void aligned_overlap_backward(const scalar_t* grad, const scalar_t* b1, const scalar_t* b2,
                                                     int64_t i, acc_t offset, bool iof, scalar_t* g1, scalar_t* g2) {
  Box<acc_t> ga{0, 0, 0, 0};
  Box<acc_t> gb{0, 0, 0, 0};
  box_iou::overlap_backward(load_box<scalar_t, acc_t>(b1, i), load_box<scalar_t, acc_t>(b2, i), offset, iof,
                            static_cast<acc_t>(grad[i]), ga, gb);
  store_box(g1, i, ga);
  store_box(g2, i, gb);
}

// All pairs (grad: [M, N]): the gradient of box `box` of bboxes1 (kFirst) or
// of bboxes2, summed in order over the boxes o = first, first + step, ... of
// the other set (the CPU sums them all, a CUDA lane every 32nd).
template <bool kFirst, typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline Box<acc_t> pair_gradient_sum(const scalar_t* grad, const scalar_t* b1, const scalar_t* b2,
                                                    int64_t m, int64_t n, int64_t box, int64_t first, int64_t step,
                                                    acc_t offset, bool iof) {
  const int64_t others = kFirst ? n : m;
  const Box<acc_t> fixed = load_box<scalar_t, acc_t>(kFirst ? b1 : b2, box);
  Box<acc_t> acc{0, 0, 0, 0};
  for (int64_t o = first; o < others; o += step) {
    Box<acc_t> unused{0, 0, 0, 0};
    const Box<acc_t> other = load_box<scalar_t, acc_t>(kFirst ? b2 : b1, o);
    if (kFirst) {
      box_iou::overlap_backward(fixed, other, offset, iof, static_cast<acc_t>(grad[box * n + o]), acc, unused);
    } else {
      box_iou::overlap_backward(other, fixed, offset, iof, static_cast<acc_t>(grad[o * n + box]), unused, acc);
    }
  }
  return acc;
}

} // namespace bbox_overlaps_math
} // namespace mmops
