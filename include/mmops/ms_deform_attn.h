#pragma once
// Public C++ API of mmops::ms_deform_attn (multi-scale deformable attention).
// The call goes through the PyTorch dispatcher, so it reaches the CPU/CUDA
// kernels and records autograd exactly like torch.ops.mmops.ms_deform_attn
// does from Python.

#include <ATen/core/Tensor.h>

namespace mmops {

// mmcv's MultiScaleDeformableAttnFunction (Deformable DETR's core op).
//   value:              [B, S, M, D] floating point (M heads of D channels; the
//                       L levels' H_l x W_l maps flattened row-major, one after
//                       the other: S = sum(H_l * W_l))
//   spatial_shapes:     [L, 2] int64, (H_l, W_l) per level
//   level_start_index:  [L] int64, first row of each level (0, H_0 * W_0, ...)
//   sampling_locations: [B, Q, M, L, P, 2] (x, y) normalised to [0, 1] per level
//   attention_weights:  [B, Q, M, L, P]
//   output:             [B, Q, M * D]
// Each point samples its level bilinearly at pixel (x * W_l - 0.5, y * H_l - 0.5)
// (grid_sample, align_corners=False, zero padding), times its attention weight,
// summed over levels and points. A non-finite location is worth 0.
// Differentiable w.r.t. value, sampling_locations and attention_weights.
at::Tensor ms_deform_attn(const at::Tensor& value, const at::Tensor& spatial_shapes,
                          const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                          const at::Tensor& attention_weights);

} // namespace mmops
