#pragma once
// BEV boxes of mmcv's iou3d as rotated boxes, CPU and CUDA: the geometry is
// common/polygon.h's exact convex clip, the quick reject common/rotated_iou.h's
// bounding circles. T is the compute type (float for float/half/bfloat16).

#include "common/polygon.h"
#include "common/rotated_iou.h"

#include <c10/macros/Macros.h>

namespace mmops {
namespace bev {

template <typename T>
using Shape = rotated_iou::Shape<T, 5>;

// One row as (cx, cy, w, h, theta), theta turning the w axis from +x towards
// +y (mmcv's heading). [*, 7] rows are (x, y, z, dx, dy, dz, heading);
// [*, 5] rows (x1, y1, x2, y2, ry) become ((x1 + x2) / 2, (y1 + y2) / 2,
// x2 - x1, y2 - y1, ry) in T, as mmcv's conversion to box_iou_rotated's boxes.
template <typename scalar_t, typename T>
C10_HOST_DEVICE inline Shape<T> load_box(const scalar_t* __restrict__ row, bool xyxyr) {
  T v[5];
  if (xyxyr) {
    const T x1 = static_cast<T>(row[0]), y1 = static_cast<T>(row[1]);
    const T x2 = static_cast<T>(row[2]), y2 = static_cast<T>(row[3]);
    v[0] = (x1 + x2) / T(2);
    v[1] = (y1 + y2) / T(2);
    v[2] = x2 - x1;
    v[3] = y2 - y1;
    v[4] = static_cast<T>(row[4]);
  } else {
    v[0] = static_cast<T>(row[0]);
    v[1] = static_cast<T>(row[1]);
    v[2] = static_cast<T>(row[3]);
    v[3] = static_cast<T>(row[4]);
    v[4] = static_cast<T>(row[6]);
  }
  return rotated_iou::load_shape<T, T, 5>(v, /*clockwise=*/true);
}

// The intersection area (iou = false) or the IoU of two boxes; 0 for a box
// with a non-finite value or a side <= 0.
template <typename T>
C10_HOST_DEVICE inline T overlap(const Shape<T>& a, const Shape<T>& b, bool iou) {
  if (rotated_iou::surely_disjoint(a, b)) {
    return T(0);
  }
  if (iou) {
    return polygon::rotated_box_overlap<T>(a.v, b.v, /*iof=*/false);
  }
  return polygon::rotated_box_areas<T>(a.v, b.v).inter;
}

} // namespace bev
} // namespace mmops
