#pragma once
// Device kernels of ms_deform_attn (multi-scale deformable attention). Callers
// (src/ms_deform_attn) validate shapes, dtypes and devices first; these
// functions only compute.
//
// Shapes: value [B, S, M, D] (M heads of D channels), spatial_shapes [L, 2]
// int64 (H, W per level), level_start_index [L] int64, sampling_locations
// [B, Q, M, L, P, 2] (x, y) normalised to [0, 1], attention_weights
// [B, Q, M, L, P]; output [B, Q, M * D].
//
// A level whose rows [start, start + H * W) do not lie inside [0, S) (or with
// a negative H or W) contributes 0 and receives no gradient: the callers
// reject such levels first where the index policy says so (always on CPU),
// the CUDA kernels guard them (no host sync).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace mmops {
namespace kernels {

at::Tensor ms_deform_attn_forward_cpu(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                      const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                      const at::Tensor& attention_weights);

// (grad_value, grad_sampling_locations, grad_attention_weights).
std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward_cpu(
    const at::Tensor& grad_output, const at::Tensor& value, const at::Tensor& spatial_shapes,
    const at::Tensor& level_start_index, const at::Tensor& sampling_locations, const at::Tensor& attention_weights);

#ifdef MMOPS_WITH_CUDA
at::Tensor ms_deform_attn_forward_cuda(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                       const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                       const at::Tensor& attention_weights);

std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward_cuda(
    const at::Tensor& grad_output, const at::Tensor& value, const at::Tensor& spatial_shapes,
    const at::Tensor& level_start_index, const at::Tensor& sampling_locations, const at::Tensor& attention_weights);
#endif

} // namespace kernels
} // namespace mmops
