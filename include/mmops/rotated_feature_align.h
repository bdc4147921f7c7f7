#pragma once
// Public C++ API of mmops::rotated_feature_align (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {

// R3Det / S2A-Net feature refinement with mmcv's semantics:
//   features:     [N, C, H, W] floating point (any memory format; the output keeps it)
//   best_rbboxes: [N, H, W, 5] per pixel, same dtype/device; mmcv's layout: the
//                 centre is sampled at row b0 * spatial_scale, column b1 * spatial_scale,
//                 b2, b3 the width and height (scaled), b4 the angle in radians
//   points:       1 (centre) or 5 (centre and the 4 corners)
//   output:       features + the sum of the bilinear samples of features at the points
// Differentiable w.r.t. features (not best_rbboxes).
at::Tensor rotated_feature_align(const at::Tensor& features, const at::Tensor& best_rbboxes,
                                 double spatial_scale = 0.125, int64_t points = 1);

} // namespace mmops
