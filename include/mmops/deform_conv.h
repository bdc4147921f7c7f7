#pragma once
// Public C++ API of mmops::deform_conv2d (DCNv1) and mmops::modulated_deform_conv2d
// (DCNv2), through the dispatcher (autograd included: gradients to input,
// offset, mask, weight and bias).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>

namespace mmops {

// Deformable convolution (mmcv / torchvision semantics).
//   input:  [N, C_in, H, W] floating point
//   offset: [N, 2 * deform_groups * kh * kw, H_out, W_out]; channel
//           (g * kh * kw + k) * 2 holds dy, + 1 holds dx of tap k = i * kw + j
//           of deform group g (input channels [g * C_in / deform_groups, ...))
//   weight: [C_out, C_in / groups, kh, kw]; bias: optional [C_out]
//   output: [N, C_out, H_out, W_out], H_out = (H + 2 * padding[0] - (dilation[0] * (kh - 1) + 1)) / stride[0] + 1
// Tap k of output pixel (ho, wo) samples the input bilinearly (zero outside the
// map) at y = ho * stride[0] - padding[0] + i * dilation[0] + dy,
// x = wo * stride[1] - padding[1] + j * dilation[1] + dx. A NaN offset samples 0.
// Every tensor shares the input's dtype and device. The output has the input's
// memory format (channels_last in, channels_last out).
at::Tensor deform_conv2d(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias = std::nullopt, at::IntArrayRef stride = {1, 1},
                         at::IntArrayRef padding = {0, 0}, at::IntArrayRef dilation = {1, 1}, int64_t groups = 1,
                         int64_t deform_groups = 1);

// Modulated deformable convolution (DCNv2): as deform_conv2d (same arguments
// and defaults), each sample multiplied by mask[n, g * kh * kw + k, ho, wo].
//   mask: [N, deform_groups * kh * kw, H_out, W_out]
at::Tensor modulated_deform_conv2d(const at::Tensor& input, const at::Tensor& offset, const at::Tensor& mask,
                                   const at::Tensor& weight, const std::optional<at::Tensor>& bias = std::nullopt,
                                   at::IntArrayRef stride = {1, 1}, at::IntArrayRef padding = {0, 0},
                                   at::IntArrayRef dilation = {1, 1}, int64_t groups = 1, int64_t deform_groups = 1);

} // namespace mmops
