#pragma once
// The roiaware_pool3d kernels' parameters and device entry points. Callers
// (src/roiaware_pool3d) validate the arguments first; these only compute.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {

enum class RoIAwarePoolMode { kMax, kAvg };

// Plain data for the kernels.
struct RoIAwarePool3dParams {
  int64_t out_x = 0, out_y = 0, out_z = 0; // voxels per roi along the box's x, y, z
  int64_t max_kept = 0;                    // points kept per voxel: max_pts_per_voxel - 1 (mmcv's rule)
  RoIAwarePoolMode mode = RoIAwarePoolMode::kMax;
};

namespace kernels {

// rois [N, 7], pts [P, 3], pts_feature [P, C] (any strides). Returns
//  - pooled [N, out_x, out_y, out_z, C] in the features' dtype: per voxel the
//    max (first maximum in point order; NaN wins) or mean of its kept points,
//    0 for an empty voxel;
//  - argmax int32 [N, out_x, out_y, out_z, C] (max mode; -1 for an empty
//    voxel) or [0] (avg mode);
//  - point_voxels int32 [N, P]: the flat voxel of point p in roi n if kept, else -1;
//  - voxel_counts int32 [N, out_x * out_y * out_z]: points kept per voxel.
// A point is kept while its voxel holds fewer than max_kept points (index order).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> roiaware_pool3d_forward_cpu(const at::Tensor& rois,
                                                                                       const at::Tensor& pts,
                                                                                       const at::Tensor& pts_feature,
                                                                                       const RoIAwarePool3dParams& p);

// The forward's outputs for rois [N, 7] and pts_feature [P, C], allocated
// (pooled, argmax, point_voxels uninitialised; voxel_counts zero unless
// zero_counts is false) on the features' device: CPU and CUDA return the same
// shapes.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> roiaware_pool3d_outputs(int64_t num_rois,
                                                                                   const at::Tensor& pts_feature,
                                                                                   const RoIAwarePool3dParams& p,
                                                                                   bool zero_counts = true);

// grad_in [P, C] (P = point_voxels.size(1)) from grad_out [N, X, Y, Z, C] and
// the forward's argmax / point_voxels / voxel_counts: per point the sum over
// the rois in index order (deterministic, no atomics).
at::Tensor roiaware_pool3d_backward_cpu(const at::Tensor& grad_out, const at::Tensor& argmax,
                                        const at::Tensor& point_voxels, const at::Tensor& voxel_counts,
                                        const RoIAwarePool3dParams& p);

#ifdef MMOPS_WITH_CUDA
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> roiaware_pool3d_forward_cuda(const at::Tensor& rois,
                                                                                        const at::Tensor& pts,
                                                                                        const at::Tensor& pts_feature,
                                                                                        const RoIAwarePool3dParams& p);
at::Tensor roiaware_pool3d_backward_cuda(const at::Tensor& grad_out, const at::Tensor& argmax,
                                         const at::Tensor& point_voxels, const at::Tensor& voxel_counts,
                                         const RoIAwarePool3dParams& p);
#endif

} // namespace kernels
} // namespace mmops
