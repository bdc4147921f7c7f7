#pragma once
// Public C++ API of mmops::prroi_pool (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

namespace mmops {

// Precise RoI Pooling (PrRoIPool, mmcv semantics): each output is the mean of
// the bilinearly interpolated feature map (zeros outside) over its bin,
// integrated exactly; bins are the roi (corners times spatial_scale, no
// half-pixel offset, sides clamped at 0) split evenly.
//   input:  [N, C, H, W] floating point
//   rois:   [K, 5] = (batch_index, x1, y1, x2, y2) in image coordinates, same dtype/device
//   output: [K, C, output_size[0], output_size[1]]
// Differentiable w.r.t. input and the roi coordinates.
at::Tensor prroi_pool(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                      double spatial_scale = 1.0);

} // namespace mmops
