#pragma once
// Internal to ms_deform_attn: the validation (ms_deform_attn_checks.cpp),
// shared by the device entries (ms_deform_attn.cpp) and the meta kernels
// (ms_deform_attn_meta.cpp), and the dispatcher signature of each schema (for
// detail::op_handle).

#include "ms_deform_attn/ms_deform_attn_kernels.h"

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mmops {

// spatial_shapes may name at most this many levels (the CUDA kernels keep the
// level table in shared memory).
constexpr int64_t kMaxMsDeformAttnLevels = 1024;

namespace detail {

// Shapes, dtypes and devices of a forward call; works on real and on
// fake/meta tensors (no data access).
void check_ms_deform_attn_forward(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                  const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                  const at::Tensor& attention_weights);

// The above plus grad_output [B, Q, M * D] with value's dtype and device.
void check_ms_deform_attn_backward(const at::Tensor& grad_output, const at::Tensor& value,
                                   const at::Tensor& spatial_shapes, const at::Tensor& level_start_index,
                                   const at::Tensor& sampling_locations, const at::Tensor& attention_weights);

// The level table held in tensor data: H, W >= 0, level_start_index the
// running sum of H * W, sum(H * W) == rows (= value.size(1)). Reads the data
// (a device-to-host copy for CUDA tensors): the device entries call it when
// the index policy says so (common/index_policy.h).
void check_levels(const at::Tensor& spatial_shapes, const at::Tensor& level_start_index, int64_t rows);

} // namespace detail

// ms_deform_attn(Tensor value, Tensor spatial_shapes, Tensor level_start_index,
//     Tensor sampling_locations, Tensor attention_weights) -> Tensor
using MsDeformAttnFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  const at::Tensor&);

// _ms_deform_attn_backward(Tensor grad_output, Tensor value, Tensor spatial_shapes,
//     Tensor level_start_index, Tensor sampling_locations, Tensor attention_weights)
//     -> (Tensor grad_value, Tensor grad_sampling_locations, Tensor grad_attention_weights)
using MsDeformAttnBackwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                              const at::Tensor&, const at::Tensor&,
                                                                              const at::Tensor&, const at::Tensor&);

} // namespace mmops
