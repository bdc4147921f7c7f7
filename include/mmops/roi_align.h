#pragma once
// Public C++ API of mmops::roi_align. The call goes through the PyTorch
// dispatcher, so it reaches the CPU/CUDA kernels and records autograd exactly
// like torch.ops.mmops.roi_align does from Python.

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/string_view.h>

namespace mmops {

// RoIAlign with mmcv semantics.
//   input:  [N, C, H, W] floating point
//   rois:   [K, 5] = (batch_index, x1, y1, x2, y2) in image coordinates, same dtype/device
//   output: [K, C, output_size[0], output_size[1]]
// pool_mode is "avg" or "max"; sampling_ratio 0 means adaptive (ceil(roi_size / output_size)).
// See docs/ops/roi_align.md.
at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                     double spatial_scale = 1.0, int64_t sampling_ratio = 0, c10::string_view pool_mode = "avg",
                     bool aligned = true);

} // namespace mmops
