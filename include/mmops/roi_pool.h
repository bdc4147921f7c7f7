#pragma once
// Public C++ API of mmops::roi_pool (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

namespace mmops {

// RoIPool with torchvision semantics (box corners scaled and rounded, bins
// quantised to whole pixels, max over each bin; an empty bin gives 0).
//   input:  [N, C, H, W] floating point
//   rois:   [K, 5] = (batch_index, x1, y1, x2, y2) in image coordinates, same dtype/device
//   output: [K, C, output_size[0], output_size[1]]
// Differentiable w.r.t. input (the gradient goes to each bin's max pixel).
at::Tensor roi_pool(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                    double spatial_scale = 1.0);

} // namespace mmops
