#pragma once
// Public C++ API of mmops::bbox_overlaps (through the PyTorch dispatcher, so
// autograd works from C++ too).

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>

namespace mmops {

// mmcv bbox_overlaps. bboxes1 [M, 4], bboxes2 [N, 4] (x1, y1, x2, y2), one
// floating dtype and device. mode "iou" (intersection over union) or "iof"
// (intersection over the area of the bboxes1 box); aligned: row i with row i
// only ([M], needs M == N), else all pairs ([M, N]); offset 0 or 1 (adds 1 to
// widths and heights). Differentiable w.r.t. both box sets.
at::Tensor bbox_overlaps(const at::Tensor& bboxes1, const at::Tensor& bboxes2, c10::string_view mode = "iou",
                         bool aligned = false, int64_t offset = 0);

} // namespace mmops
