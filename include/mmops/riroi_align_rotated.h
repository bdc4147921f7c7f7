#pragma once
// Public C++ API of mmops::riroi_align_rotated (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace mmops {

// ReDet's rotation-invariant RoIAlign with mmcv semantics: rotated RoIAlign
// (no half-pixel shift, rois at least 1 x 1) whose orientation channels are
// shifted cyclically by the roi's angle, blending the two nearest orientations.
//   features: [N, C, H, W] floating point, C = groups * num_orientations
//   rois:     [K, 6] = (batch_index, cx, cy, w, h, theta in radians), same dtype/device
//   output:   [K, C, out_size[0], out_size[1]]
// num_samples 0: ceil(side / output side) samples per bin side; clockwise
// negates theta for the rotation. Differentiable w.r.t. features (not rois).
at::Tensor riroi_align_rotated(const at::Tensor& features, const at::Tensor& rois, at::IntArrayRef out_size,
                               double spatial_scale = 1.0, int64_t num_samples = 0, int64_t num_orientations = 8,
                               bool clockwise = false);

} // namespace mmops
