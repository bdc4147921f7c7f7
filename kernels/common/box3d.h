#pragma once
// The point-in-3D-box test of mmcv's LiDAR boxes (points_in_boxes,
// roiaware_pool3d, roipoint_pool3d), for CPU and CUDA.
//
// A box is [x, y, z, dx, dy, dz, rz]: (x, y) the centre, z the bottom, sizes
// along the box's own axes, rz the yaw. A point's local coordinates are the
// offset from the centre rotated by -rz:
//   local_x =  sx * cos(rz) + sy * sin(rz),   local_y = -sx * sin(rz) + sy * cos(rz)
// It is inside when |z - (z_bottom + dz / 2)| <= dz / 2 (inclusive, as mmcv)
// and -dx/2 < local_x < dx/2, -dy/2 < local_y < dy/2 (strict, as mmcv).
// Defined beyond mmcv: a non-finite value in the point or the box means
// outside. Products are rounded once (mul_rn) so CPU and CUDA agree bitwise.

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"

namespace mmops {
namespace box3d {

// One box, prepared once (trigonometry, centre height) for many points.
template <typename T>
struct Box3d {
  T cx, cy, cz, half_dx, half_dy, half_dz, cos_rz, sin_rz;
  T bottom, dx, dy, dz;
  bool finite;

  // b: the 7 values (any type convertible to T).
  template <typename S>
  C10_HOST_DEVICE static Box3d load(const S* b) {
    namespace hdm = host_device_math;
    Box3d box{};
    box.cx = static_cast<T>(b[0]);
    box.cy = static_cast<T>(b[1]);
    box.bottom = static_cast<T>(b[2]);
    box.dx = static_cast<T>(b[3]);
    box.dy = static_cast<T>(b[4]);
    box.dz = static_cast<T>(b[5]);
    const T rz = static_cast<T>(b[6]);
    box.finite = hdm::is_finite(box.cx) && hdm::is_finite(box.cy) && hdm::is_finite(box.bottom) &&
                 hdm::is_finite(box.dx) && hdm::is_finite(box.dy) && hdm::is_finite(box.dz) && hdm::is_finite(rz);
    box.half_dx = box.dx / T(2);
    box.half_dy = box.dy / T(2);
    box.half_dz = box.dz / T(2);
    box.cz = box.bottom + box.half_dz;
    // in double, then rounded: host and device libm agree on the rounded value
    // (float cosf / sinf may differ by an ulp, which would move points on a face)
    box.cos_rz = static_cast<T>(hdm::cos_of(static_cast<double>(rz)));
    box.sin_rz = static_cast<T>(hdm::sin_of(static_cast<double>(rz)));
    return box;
  }

  // Whether (px, py, pz) is inside; local_x / local_y receive the point's
  // box coordinates when it is.
  C10_HOST_DEVICE bool contains(T px, T py, T pz, T& local_x, T& local_y) const {
    namespace hdm = host_device_math;
    if (!(finite && hdm::is_finite(px) && hdm::is_finite(py) && hdm::is_finite(pz))) {
      return false;
    }
    if (hdm::abs_of(pz - cz) > half_dz) {
      return false;
    }
    const T sx = px - cx;
    const T sy = py - cy;
    local_x = hdm::mul_rn(sx, cos_rz) + hdm::mul_rn(sy, sin_rz);
    local_y = hdm::mul_rn(sy, cos_rz) - hdm::mul_rn(sx, sin_rz);
    return local_x > -half_dx && local_x < half_dx && local_y > -half_dy && local_y < half_dy;
  }

  C10_HOST_DEVICE bool contains(T px, T py, T pz) const {
    T lx, ly;
    return contains(px, py, pz, lx, ly);
  }
};

} // namespace box3d
} // namespace mmops
