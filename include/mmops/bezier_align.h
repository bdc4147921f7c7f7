#pragma once
// Public C++ API of mmops::bezier_align (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace mmops {

// ABCNet's BezierAlign with mmcv's semantics (mmcv.ops.bezier_align):
//   input:  [N, C, H, W] floating point
//   rois:   [K, 17] = (batch_index, then 8 control points x, y: 4 of the top cubic
//           Bezier curve from its left end, 4 of the bottom one from its right end)
//           in image coordinates, dtype and device of input
//   output: [K, C, output_size[0], output_size[1]]: bin (ph, pw) averages
//           bilinear samples around the point at u = pw / out_w on the curves,
//           v = ph / out_h between them (docs/ops/bezier_align.md).
// sampling_ratio <= 0 means adaptive (ceil(roi size / output size) per bin side).
// Differentiable w.r.t. input; rois get no gradient.
at::Tensor bezier_align(const at::Tensor& input, const at::Tensor& rois, at::IntArrayRef output_size,
                        double spatial_scale = 1.0, int64_t sampling_ratio = 0, bool aligned = true);

} // namespace mmops
