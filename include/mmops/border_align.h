#pragma once
// Public C++ API of mmops::border_align (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {

// BorderDet's BorderAlign with mmcv's semantics (mmcv.ops.border_align):
//   input:     [N, 4C, H, W] floating point; channels [0, C), [C, 2C), [2C, 3C),
//              [3C, 4C) hold the top, left, bottom and right border features
//   boxes:     [N, H * W, 4] (x1, y1, x2, y2) in input's pixels, dtype of input
//   pool_size: >= 1; pool_size + 1 points are sampled along each border
//   output:    [N, C, H * W, 4] (last dim: top, left, bottom, right), the maximum
//              over the border's bilinearly sampled points, from its channel group.
// Differentiable w.r.t. input (the gradient goes to the winning point's four
// neighbours); boxes get no gradient.
at::Tensor border_align(const at::Tensor& input, const at::Tensor& boxes, int64_t pool_size);

} // namespace mmops
