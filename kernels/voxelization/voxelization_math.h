#pragma once
// Math shared by the CPU and CUDA kernels of hard_voxelize, dynamic_voxelize and
// dynamic_scatter (C10_HOST_DEVICE, no ATen).
//
// The voxel of a point, mmcv's floor rule: along each axis
//   cell = floor((p - range_min) / voxel_size)
// in the compute type (float for float/half/bfloat16 points, double for double),
// with voxel_size and range_min rounded to float32 first (mmcv's parameters are
// float32). A point is in range when 0 <= cell < cells on all three axes; a point
// exactly on range_min is in cell 0, one exactly on range_max is out. NaN and
// +-Inf coordinates fail the comparison: out of range.

#include "common/host_device_math.h"

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mmops {

// The voxel grid, axes in x, y, z order (the point columns 0, 1, 2).
struct VoxelGrid {
  float size[3];
  float min[3];
  int32_t cells[3]; // round((range_max - range_min) / voxel_size), in [1, 2^31)
};

enum class ScatterReduce { Sum, Mean, Max };

namespace voxelization {

// The cell of coordinate p along one axis, or -1 when out of range (NaN, Inf too).
template <typename acc_t>
C10_HOST_DEVICE inline int32_t axis_cell(acc_t p, float min, float size, int32_t cells) {
  const acc_t c = host_device_math::floor_of((p - static_cast<acc_t>(min)) / static_cast<acc_t>(size));
  return (c >= acc_t(0) && c < static_cast<acc_t>(cells)) ? static_cast<int32_t>(c) : -1;
}

// The voxel (z, y, x) of the point whose x, y, z are point[0..2]: true when in
// range; zyx is then set, else left alone.
template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE inline bool point_voxel(const scalar_t* point, const VoxelGrid& g, int32_t zyx[3]) {
  int32_t cell[3];
  for (int a = 0; a < 3; ++a) {
    cell[a] = axis_cell<acc_t>(static_cast<acc_t>(point[a]), g.min[a], g.size[a], g.cells[a]);
    if (cell[a] < 0) {
      return false;
    }
  }
  zyx[0] = cell[2];
  zyx[1] = cell[1];
  zyx[2] = cell[0];
  return true;
}

// One int64 per voxel, increasing with (z, y, x): the sort key of hard_voxelize.
C10_HOST_DEVICE inline int64_t voxel_key(const int32_t zyx[3], const VoxelGrid& g) {
  return (static_cast<int64_t>(zyx[0]) * g.cells[1] + zyx[1]) * g.cells[0] + zyx[2];
}

C10_HOST_DEVICE inline void voxel_of_key(int64_t key, const VoxelGrid& g, int32_t zyx[3]) {
  zyx[2] = static_cast<int32_t>(key % g.cells[0]);
  key /= g.cells[0];
  zyx[1] = static_cast<int32_t>(key % g.cells[1]);
  zyx[0] = static_cast<int32_t>(key / g.cells[1]);
}

// dynamic_scatter: channel c of voxel v, whose points are order[begin, end)
// (ascending point index, begin < end; int64 on the CPU, int32 in the CUDA
// pipeline). Sum and mean add in that order; max keeps the first maximum (the
// lowest point index) and a NaN wins (the first NaN), as torch.amax
// propagates NaN; *argmax gets the winning point.
template <typename scalar_t, typename acc_t, typename index_t>
C10_HOST_DEVICE inline void reduce_voxel_channel(const scalar_t* feats, int64_t channels, const index_t* order,
                                                 int64_t begin, int64_t end, int64_t c, ScatterReduce reduce,
                                                 scalar_t* out, int32_t* argmax) {
  if (reduce == ScatterReduce::Max) {
    host_device_math::MaxTracker<acc_t> best;
    for (int64_t j = begin; j < end; ++j) {
      best.update(static_cast<acc_t>(feats[static_cast<int64_t>(order[j]) * channels + c]),
                  static_cast<int>(j - begin));
    }
    *out = static_cast<scalar_t>(best.result());
    *argmax = static_cast<int32_t>(order[begin + best.index]);
    return;
  }
  acc_t sum = acc_t(0);
  for (int64_t j = begin; j < end; ++j) {
    sum += static_cast<acc_t>(feats[static_cast<int64_t>(order[j]) * channels + c]);
  }
  *out = static_cast<scalar_t>(reduce == ScatterReduce::Mean ? sum / static_cast<acc_t>(end - begin) : sum);
}

// dynamic_scatter backward: the gradient of channel c of point p, in voxel v
// (-1: dropped; a value outside [0, voxels) is treated as dropped).
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline scalar_t point_grad(const scalar_t* grad_voxel_feats, const int32_t* count,
                                           const int32_t* argmax, int64_t voxels, int64_t channels, int64_t p,
                                           int64_t v, int64_t c, ScatterReduce reduce) {
  if (v < 0 || v >= voxels) {
    return scalar_t(0);
  }
  const int64_t at = v * channels + c;
  const acc_t g = static_cast<acc_t>(grad_voxel_feats[at]);
  switch (reduce) {
    case ScatterReduce::Sum:
      return static_cast<scalar_t>(g);
    case ScatterReduce::Mean:
      return static_cast<scalar_t>(count[v] > 0 ? g / static_cast<acc_t>(count[v]) : acc_t(0));
    default:
      return argmax[at] == p ? static_cast<scalar_t>(g) : scalar_t(0);
  }
}

} // namespace voxelization
} // namespace mmops
