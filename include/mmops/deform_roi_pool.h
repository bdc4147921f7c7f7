#pragma once
// Public C++ API of mmops::deform_roi_pool (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>

namespace mmops {

// mmcv's DeformRoIPool: roi_align-style average pooling (corners shifted by
// -0.5, sampling_ratio 0 = adaptive) where bin (ph, pw) is moved by
// gamma * offset[k, :, ph, pw] * (roi width, roi height).
//   input:  [N, C, H, W] floating point
//   rois:   [K, 5] = (batch_index, x1, y1, x2, y2) in image coordinates, same dtype/device
//   offset: [K, 2, output_size[0], output_size[1]] (x, y) or none (no shift)
//   output: [K, C, output_size[0], output_size[1]]
// Differentiable w.r.t. input and offset.
at::Tensor deform_roi_pool(const at::Tensor& input, const at::Tensor& rois, const std::optional<at::Tensor>& offset,
                           at::IntArrayRef output_size, double spatial_scale = 1.0, int64_t sampling_ratio = 0,
                           double gamma = 0.1);

} // namespace mmops
