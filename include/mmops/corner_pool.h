#pragma once
// Public C++ API of mmops::corner_pool (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

namespace mmops {

// CornerNet's corner pooling (mmcv's CornerPool): a running maximum along one
// axis of input [N, C, H, W] (floating point, any memory format; the output
// keeps input's suggested memory format):
//   "top":    out[.., h, w] = max over h' >= h of input[.., h', w]
//   "bottom": out[.., h, w] = max over h' <= h
//   "left":   out[.., h, w] = max over w' >= w of input[.., h, w']
//   "right":  out[.., h, w] = max over w' <= w
// Differentiable w.r.t. input: each output's gradient goes to the position
// that attains its maximum, the nearest one on ties; NaN propagates (the
// gradient then goes to the nearest NaN). docs/ops/corner_pool.md.
at::Tensor corner_pool(const at::Tensor& input, c10::string_view mode);

} // namespace mmops
