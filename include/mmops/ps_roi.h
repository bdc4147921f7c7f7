#pragma once
// Public C++ API of mmops::ps_roi_align and mmops::ps_roi_pool (through the
// dispatcher, autograd included): position-sensitive RoI pooling with
// torchvision's semantics (R-FCN, Light-Head R-CNN).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace mmops {

// Position-sensitive RoIAlign: bin (ph, pw) of output channel c averages
// bilinear samples of input channel (c * PH + ph) * PW + pw (corners scaled
// and shifted by -0.5; sampling_ratio <= 0: ceil(roi size / output size)
// samples per bin side).
//   input:  [N, C, H, W] floating point, C a multiple of PH * PW
//   rois:   [K, 5] = (batch_index, x1, y1, x2, y2) in image coordinates, same dtype/device
//   output: [K, C / (PH * PW), PH, PW] with (PH, PW) = output_size
// Differentiable w.r.t. input.
at::Tensor ps_roi_align(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                        double spatial_scale = 1.0, int64_t sampling_ratio = -1);

// Position-sensitive RoIPool: bin (ph, pw) of output channel c is the mean of
// input channel (c * PH + ph) * PW + pw over the bin's pixels (corners scaled
// and rounded, bins quantised to whole pixels; an empty bin gives 0). Shapes
// as ps_roi_align. Differentiable w.r.t. input.
at::Tensor ps_roi_pool(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                       double spatial_scale = 1.0);

} // namespace mmops
