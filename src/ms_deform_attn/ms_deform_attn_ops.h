#pragma once
// Internal pieces of ms_deform_attn shared by its registration, meta and
// autograd files: validation and typed dispatcher handles.

#include "ms_deform_attn/ms_deform_attn_kernels.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <tuple>

namespace mmops {

// spatial_shapes may name at most this many levels (the CUDA kernels keep the
// level table in shared memory).
constexpr int64_t kMaxMsDeformAttnLevels = 1024;

namespace detail {

// Shapes, dtypes and devices of a forward call; works on real and on
// fake/meta tensors (no data access).
void check_ms_deform_attn_forward(const char* op, const at::Tensor& value, const at::Tensor& spatial_shapes,
                                  const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                  const at::Tensor& attention_weights);

// The above plus grad_output [B, Q, M * D] with value's dtype and device.
void check_ms_deform_attn_backward(const char* op, const at::Tensor& grad_output, const at::Tensor& value,
                                   const at::Tensor& spatial_shapes, const at::Tensor& level_start_index,
                                   const at::Tensor& sampling_locations,
                                   const at::Tensor& attention_weights);

// The level table held in tensor data: H, W >= 0, level_start_index the
// running sum of H * W, sum(H * W) == rows (= value.size(1)). Always on CPU;
// on CUDA only in strict mode and not while a graph is being captured.
void check_levels_if_needed(const char* op, const at::Tensor& spatial_shapes,
                            const at::Tensor& level_start_index, int64_t rows);

} // namespace detail

namespace ops {

using MsDeformAttnFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  const at::Tensor&, const at::Tensor&);
using MsDeformAttnBackwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
    const at::Tensor&);

inline at::Tensor ms_deform_attn(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                 const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                                 const at::Tensor& attention_weights) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::ms_deform_attn", "")
                       .typed<MsDeformAttnFn>();
  return op.call(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
}

inline std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward(
    const at::Tensor& grad_output, const at::Tensor& value, const at::Tensor& spatial_shapes,
    const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
    const at::Tensor& attention_weights) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mmops::_ms_deform_attn_backward", "")
                       .typed<MsDeformAttnBackwardFn>();
  return op.call(grad_output, value, spatial_shapes, level_start_index, sampling_locations,
                 attention_weights);
}

} // namespace ops
} // namespace mmops
