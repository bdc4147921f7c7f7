#pragma once
// Public C++ API of mmops::masked_conv2d, through the dispatcher (autograd
// included: gradients to input, weight and bias).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <optional>

namespace mmops {

// mmcv's masked convolution (guided anchoring): a convolution evaluated only
// where mask > 0, zero elsewhere (no bias there either).
//   input:  [N, C, H, W] floating point
//   mask:   [N, H_out, W_out] (or, with stride 1, [N, H, W] as mmcv requires),
//           any real dtype; mask[n, h, w] > 0 selects output position (h, w)
//   weight: [O, C, kh, kw]; bias: optional [O]; same dtype and device as input
//   output: [N, O, H_out, W_out], H_out = (H + 2 * padding[0] - kh) / stride[0] + 1
// The result at a selected position is the ordinary convolution value (+ bias).
at::Tensor masked_conv2d(const at::Tensor& input, const at::Tensor& mask, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias = std::nullopt, at::IntArrayRef padding = {0, 0},
                         at::IntArrayRef stride = {1, 1});

} // namespace mmops
