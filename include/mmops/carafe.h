#pragma once
// Public C++ API of mmops::carafe (through the dispatcher, autograd included).

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mmops {

// CARAFE (content-aware reassembly of features) with mmcv's semantics.
//   features: [N, C, H, W] floating point, C divisible by group_size
//   masks:    [N, kernel_size^2 * group_size, H * scale_factor, W * scale_factor], same
//             dtype/device (the reassembly kernels, normalised by the caller)
//   output:   [N, C, H * scale_factor, W * scale_factor]; output pixel (ho, wo) of channel
//             c is the sum over the kernel_size x kernel_size window (zero padded) around
//             (ho / scale_factor, wo / scale_factor) of c, weighted by the masks of c's group.
// kernel_size odd in [1, 11], group_size >= 1, scale_factor >= 1.
// Differentiable w.r.t. features and masks.
at::Tensor carafe(const at::Tensor& features, const at::Tensor& masks, int64_t kernel_size, int64_t group_size,
                  int64_t scale_factor);

} // namespace mmops
