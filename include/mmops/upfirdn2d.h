#pragma once
// Public C++ API of mmops::upfirdn2d (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

namespace mmops {

// StyleGAN2's upfirdn2d with mmcv's semantics (mmcv.ops.upfirdn2d, flip_filter
// false, gain 1): for each plane of input [N, C, H, W] (floating point),
//   1. upsample: insert up - 1 zeros after each pixel (up = {up_x, up_y}),
//   2. pad with zeros (pad = {pad_x0, pad_x1, pad_y0, pad_y1}; negative crops),
//   3. convolve with kernel [kh, kw] (floating point, any dtype; the kernel is
//      flipped as in a true convolution), keeping the positions where the whole
//      kernel lies inside the padded signal,
//   4. downsample: keep every down-th sample (down = {down_x, down_y}).
// Output [N, C, (H * up_y + pad_y0 + pad_y1 - kh) / down_y + 1,
//               (W * up_x + pad_x0 + pad_x1 - kw) / down_x + 1], input's dtype.
// Differentiable w.r.t. input to any order; kernel gets no gradient.
at::Tensor upfirdn2d(const at::Tensor& input, const at::Tensor& kernel, c10::IntArrayRef up = {1, 1},
                     c10::IntArrayRef down = {1, 1}, c10::IntArrayRef pad = {0, 0, 0, 0});

} // namespace mmops
