#pragma once
// Public C++ API of mmops::psa_mask (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

namespace mmops {

// PSANet's point-wise spatial attention mask layout (mmcv's PSAMask):
//   input:     [N, mask_h * mask_w, H, W] floating point, a mask_h x mask_w
//              attention mask centred on every pixel (centre (mask - 1) / 2)
//   psa_type:  "collect" or "distribute"
//   mask_size: {mask_h, mask_w}
//   output:    [N, H * W, H, W]; mask entry (i, j) of pixel (h, w) belongs to
//              pixel (y, x) = (h + i - (mask_h - 1) / 2, w + j - (mask_w - 1) / 2):
//              collect: output[n, y * W + x, h, w], distribute: output[n, h * W + w, y, x];
//              zero where no entry lands. Differentiable w.r.t. input.
at::Tensor psa_mask(const at::Tensor& input, c10::string_view psa_type, at::IntArrayRef mask_size);

} // namespace mmops
