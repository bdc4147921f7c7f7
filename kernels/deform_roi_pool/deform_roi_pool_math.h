#pragma once
// DeformRoIPool geometry, shared by the CPU and CUDA kernels (mmcv 2.x
// deform_roi_pool, on an accumulation type T: float or double).
//
//  * box corners are scaled by spatial_scale and shifted by -0.5 (as
//    roi_align aligned=True; no minimum size); bin = box size / pooled size;
//  * bin (ph, pw) starts at start + p * bin + gamma * offset[k, :, ph, pw] *
//    (box width, box height) (x from channel 0, y from channel 1);
//  * grid_h x grid_w samples at the centres of a regular sub-grid (sampling_ratio
//    > 0 fixes it, 0 makes it ceil(bin size), capped at kMaxAdaptiveGrid); the
//    bin is their mean, each sample bilinear with the border clamp of
//    common/roi_bilinear.h; a bin without samples is 0.
// Defined extras: a non-finite box coordinate or a batch index outside [0, N)
// makes the roi pool zeros (no gradient); a non-finite offset makes its bin's
// samples worth 0 (no gradient).

#include <c10/macros/Macros.h>

#include "common/host_device_math.h"
#include "common/roi_bilinear.h"

#include <cstdint>

namespace mmops {
namespace deform_roi_pool_math {

using host_device_math::batch_index;
using host_device_math::is_finite;
using roi_bilinear::axis_slope;
using roi_bilinear::axis_tap;
using roi_bilinear::AxisTap;
using roi_bilinear::sample_coord;
using roi_bilinear::samples_per_bin;

template <typename T>
struct DeformBox {
  T start_y, start_x; // top-left corner (before the offset)
  T roi_h, roi_w;     // box size: the offsets' unit
  T bin_h, bin_w;     // size of one output bin
  int grid_h, grid_w; // samples per bin side
  int64_t batch;      // image; -1: the roi pools zeros
};

// roi = (batch_index, x1, y1, x2, y2) in image coordinates.
template <typename T>
C10_HOST_DEVICE inline DeformBox<T> make_box(const T* roi, int64_t batch_size, T spatial_scale, int64_t pooled_h,
                                             int64_t pooled_w, int64_t sampling_ratio) {
  DeformBox<T> b;
  b.start_x = roi[1] * spatial_scale - T(0.5);
  b.start_y = roi[2] * spatial_scale - T(0.5);
  const T end_x = roi[3] * spatial_scale - T(0.5);
  const T end_y = roi[4] * spatial_scale - T(0.5);
  b.roi_w = end_x - b.start_x;
  b.roi_h = end_y - b.start_y;
  b.bin_h = b.roi_h / static_cast<T>(pooled_h);
  b.bin_w = b.roi_w / static_cast<T>(pooled_w);
  const bool valid = is_finite(b.start_x) && is_finite(b.start_y) && is_finite(end_x) && is_finite(end_y) &&
                     is_finite(b.roi_w) && is_finite(b.roi_h);
  b.batch = valid ? batch_index(roi[0], batch_size) : -1;
  b.grid_h = b.batch >= 0 ? samples_per_bin(b.roi_h, pooled_h, sampling_ratio) : 0;
  b.grid_w = b.batch >= 0 ? samples_per_bin(b.roi_w, pooled_w, sampling_ratio) : 0;
  return b;
}

// Top-left corner of bin (ph, pw) after its shift (dx, dy: the bin's offset values).
template <typename T>
struct BinOrigin {
  T y, x;
};

template <typename T>
C10_HOST_DEVICE inline BinOrigin<T> bin_origin(const DeformBox<T>& b, int64_t ph, int64_t pw, T dx, T dy, T gamma) {
  // mmcv's order: the shifted corner first, then the bin.
  return {(b.start_y + gamma * b.roi_h * dy) + static_cast<T>(ph) * b.bin_h,
          (b.start_x + gamma * b.roi_w * dx) + static_cast<T>(pw) * b.bin_w};
}

// Sample (iy, ix) of a bin whose origin is o: its taps along y and x and
// their slopes (for the offset gradient).
template <typename T>
struct SampleTaps {
  AxisTap<T> ty, tx;
  T sy, sx; // axis_slope along y and x
};

template <typename T>
C10_HOST_DEVICE inline SampleTaps<T> sample_taps(const DeformBox<T>& b, const BinOrigin<T>& o, int iy, int ix,
                                                 int64_t height, int64_t width) {
  const T y = sample_coord(o.y, b.bin_h, 0, iy, b.grid_h);
  const T x = sample_coord(o.x, b.bin_w, 0, ix, b.grid_w);
  return {axis_tap(y, height), axis_tap(x, width), axis_slope(y, height), axis_slope(x, width)};
}

// The four neighbours of a plane (row-major, `width` wide) read through `at`.
template <typename T>
struct Quad {
  T v00, v01, v10, v11; // (lo_y, lo_x), (lo_y, hi_x), (hi_y, lo_x), (hi_y, hi_x)
};

template <typename T, typename Load>
C10_HOST_DEVICE inline Quad<T> load_quad(const SampleTaps<T>& s, int64_t width, Load at) {
  const int64_t r0 = static_cast<int64_t>(s.ty.lo) * width, r1 = static_cast<int64_t>(s.ty.hi) * width;
  return {at(r0 + s.tx.lo), at(r0 + s.tx.hi), at(r1 + s.tx.lo), at(r1 + s.tx.hi)};
}

template <typename T>
C10_HOST_DEVICE inline T blend(const SampleTaps<T>& s, const Quad<T>& q) {
  return s.ty.w_lo * (s.tx.w_lo * q.v00 + s.tx.w_hi * q.v01) + s.ty.w_hi * (s.tx.w_lo * q.v10 + s.tx.w_hi * q.v11);
}

// d value / d x and d value / d y of the sample (zero along a clamped axis).
template <typename T>
C10_HOST_DEVICE inline T d_dx(const SampleTaps<T>& s, const Quad<T>& q) {
  return s.sx * (s.ty.w_lo * (q.v01 - q.v00) + s.ty.w_hi * (q.v11 - q.v10));
}

template <typename T>
C10_HOST_DEVICE inline T d_dy(const SampleTaps<T>& s, const Quad<T>& q) {
  return s.sy * (s.tx.w_lo * (q.v10 - q.v00) + s.tx.w_hi * (q.v11 - q.v01));
}

} // namespace deform_roi_pool_math
} // namespace mmops
