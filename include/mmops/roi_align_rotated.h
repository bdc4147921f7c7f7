#pragma once
// Public C++ API of mmops::roi_align_rotated (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace mmops {

// Rotated RoIAlign with mmcv semantics (Oriented R-CNN, RoI Transformer):
// each output bin averages bilinear samples on a grid of the box rotated by
// theta about its centre.
//   input:  [N, C, H, W] floating point
//   rois:   [K, 6] = (batch_index, cx, cy, w, h, theta in radians), same dtype/device
//   output: [K, C, output_size[0], output_size[1]]
// sampling_ratio 0: ceil(side / output side) samples per bin side; aligned
// shifts the centre by -0.5 pixel; clockwise negates theta. Differentiable
// w.r.t. input (not rois).
at::Tensor roi_align_rotated(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                             double spatial_scale = 1.0, int64_t sampling_ratio = 0, bool aligned = true,
                             bool clockwise = false);

} // namespace mmops
