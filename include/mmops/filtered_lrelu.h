#pragma once
// Public C++ API of mmops::filtered_lrelu (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <optional>

namespace mmops {

// StyleGAN3's filtered leaky ReLU with mmcv's semantics (mmcv.ops.filtered_lrelu),
// filters taken as they are: for each plane of input [N, C, H, W] (floating point),
//   1. add bias[c] (bias [C], input's dtype; none: 0),
//   2. upsample: insert up - 1 zeros after each pixel,
//   3. pad with zeros (padding = {pad_x0, pad_x1, pad_y0, pad_y1}; negative crops),
//   4. convolve with filter_up [fu_h, fu_w] (floating point; flipped as in a true
//      convolution; no gain: mmcv's up ** 2 is the caller's, as the Python wrapper
//      does), keeping the positions where the filter lies inside the padded signal,
//   5. leaky ReLU (slope below 0) times gain, clamped to [-clamp, clamp] if given,
//   6. convolve with filter_down [fd_h, fd_w] (as in 4) and keep every down-th sample.
// Output [N, C, (M_h - fd_h) / down + 1, (M_w - fd_w) / down + 1], input's dtype, with
// M_h = H * up + pad_y0 + pad_y1 - fu_h + 1 (M_w likewise) the intermediate's size.
// Differentiable w.r.t. input and bias (the gradient again w.r.t. the incoming
// gradient, to any order: StyleGAN's R1 penalty); the filters get no gradient.
at::Tensor filtered_lrelu(const at::Tensor& input, const at::Tensor& filter_up, const at::Tensor& filter_down,
                          const std::optional<at::Tensor>& bias = std::nullopt, int64_t up = 1, int64_t down = 1,
                          c10::IntArrayRef padding = {0, 0, 0, 0}, double gain = 1.4142135623730951, double slope = 0.2,
                          std::optional<double> clamp = std::nullopt);

} // namespace mmops
