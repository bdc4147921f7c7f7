#pragma once
// Public C++ API of mmops::multi_level_roi_align (through the dispatcher).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/string_view.h>

namespace mmops {

// FPN RoIAlign in one launch: each roi is assigned to a feature map with
// mmdet's rule, level = floor(log2(sqrt(w * h) / finest_scale + 1e-6)) clamped
// to [0, L), and pooled from it as roi_align does (mmcv semantics).
//   features:       L (1 to 8) maps [N, C, H_l, W_l], one dtype and device
//   rois:           [K, 5] = (batch_index, x1, y1, x2, y2) in image coordinates
//   spatial_scales: one per map (e.g. 1/4, 1/8, 1/16, 1/32)
//   output:         [K, C, output_size[0], output_size[1]]
// See docs/ops/multi_level_roi_align.md.
at::Tensor multi_level_roi_align(at::TensorList features, const at::Tensor& rois, at::IntArrayRef output_size,
                                 at::ArrayRef<double> spatial_scales, int64_t sampling_ratio = 0,
                                 c10::string_view pool_mode = "avg", bool aligned = true, int64_t finest_scale = 56);

} // namespace mmops
