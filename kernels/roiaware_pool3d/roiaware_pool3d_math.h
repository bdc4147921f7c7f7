#pragma once
// roiaware_pool3d's voxel of a point, and the backward's per-point gradient
// (CPU and CUDA).

#include <c10/macros/Macros.h>

#include "common/box3d.h"
#include "common/host_device_math.h"
#include "roiaware_pool3d/roiaware_pool3d_kernels.h"

#include <cstdint>

namespace mmops {
namespace roiaware_pool3d_math {

// The voxel along one axis: floor(offset / (size / out)) clamped to
// [0, out - 1] as mmcv; a NaN quotient (a zero-size box) gives 0.
template <typename T>
C10_HOST_DEVICE inline int64_t axis_voxel(T offset, T size, int64_t out) {
  const T v = offset / (size / static_cast<T>(out));
  if (!(v > T(0))) {
    return 0;
  }
  if (v >= static_cast<T>(out)) {
    return out - 1;
  }
  const int64_t i = static_cast<int64_t>(v);
  return i < out - 1 ? i : out - 1;
}

// The flat voxel ((x * out_y) + y) * out_z + z of a point inside `box`, from
// its box coordinates (local_x, local_y) and its height pz.
template <typename T>
C10_HOST_DEVICE inline int64_t voxel_of(const box3d::Box3d<T>& box, T local_x, T local_y, T pz,
                                        const RoIAwarePool3dParams& p) {
  const int64_t x = axis_voxel(local_x + box.half_dx, box.dx, p.out_x);
  const int64_t y = axis_voxel(local_y + box.half_dy, box.dy, p.out_y);
  const int64_t z = axis_voxel(pz - box.bottom, box.dz, p.out_z);
  return (x * p.out_y + y) * p.out_z + z;
}

// Pools channel c of one voxel over its kept points grouped[first, last)
// (point order) into out[o] (and argmax[o] in max mode): max with the
// first maximum winning ties and NaN winning, or the mean; 0 when empty.
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline void pool_voxel(const scalar_t* feats, const int32_t* grouped, int64_t first, int64_t last,
                                       int64_t c, int64_t channels, bool is_max, int64_t o, scalar_t* out,
                                       int32_t* argmax) {
  if (is_max) {
    host_device_math::MaxTracker<acc_t> best;
    for (int64_t k = first; k < last; ++k) {
      best.update(static_cast<acc_t>(feats[grouped[k] * channels + c]), grouped[k]);
    }
    out[o] = static_cast<scalar_t>(best.result());
    argmax[o] = best.index;
    return;
  }
  acc_t sum = 0;
  for (int64_t k = first; k < last; ++k) {
    sum += static_cast<acc_t>(feats[grouped[k] * channels + c]);
  }
  out[o] = static_cast<scalar_t>(last > first ? sum / static_cast<acc_t>(last - first) : acc_t(0));
}

// The gradient reaching point `point`, channel `c`, from the rois: over the
// rois in index order, the voxel that kept the point passes its gradient on
// (max: when the point won the channel; avg: divided by the voxel's count).
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline acc_t point_gradient(int64_t point, int64_t c, int64_t num_rois, int64_t num_points,
                                            int64_t voxels, int64_t channels, const scalar_t* grad_out,
                                            const int32_t* argmax, const int32_t* point_voxels,
                                            const int32_t* voxel_counts, RoIAwarePoolMode mode) {
  acc_t sum = acc_t(0);
  for (int64_t r = 0; r < num_rois; ++r) {
    const int64_t v = point_voxels[r * num_points + point];
    if (v < 0 || v >= voxels) { // not kept (-1); out-of-range values are skipped, never read past grad_out
      continue;
    }
    const int64_t out = (r * voxels + v) * channels + c;
    if (mode == RoIAwarePoolMode::kMax) {
      sum += argmax[out] == point ? static_cast<acc_t>(grad_out[out]) : acc_t(0);
    } else {
      sum += static_cast<acc_t>(grad_out[out]) / static_cast<acc_t>(voxel_counts[r * voxels + v]);
    }
  }
  return sum;
}

} // namespace roiaware_pool3d_math
} // namespace mmops
