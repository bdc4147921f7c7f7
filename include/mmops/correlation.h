#pragma once
// Public C++ API of mmops::correlation (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace mmops {

// The FlowNet / PWC-Net cost volume with mmcv's semantics (mmcv.ops.Correlation):
//   input1, input2: [N, C, H, W] of one floating dtype
//   output:         [N, P, P, oH, oW], P = 2 * max_displacement + 1,
//                   oH = (H + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1 (0 if negative):
//   output[n, ph, pw, oh, ow] = sum over the kernel taps (i, j) and channels c of
//     input1[n, c, y, x] * input2[n, c, y + dy, x + dx], with (y, x) = (oh, ow) * stride
//     - padding + (i, j) * dilation and (dy, dx) = ((ph, pw) - max_displacement) *
//     dilation_patch; a term with either position outside the map is 0. No normalisation.
// kernel_size, stride, padding, dilation, dilation_patch: [h, w]. Differentiable
// w.r.t. input1 and input2.
at::Tensor correlation(const at::Tensor& input1, const at::Tensor& input2, c10::IntArrayRef kernel_size = {1, 1},
                       int64_t max_displacement = 1, c10::IntArrayRef stride = {1, 1},
                       c10::IntArrayRef padding = {0, 0}, c10::IntArrayRef dilation = {1, 1},
                       c10::IntArrayRef dilation_patch = {1, 1});

} // namespace mmops
