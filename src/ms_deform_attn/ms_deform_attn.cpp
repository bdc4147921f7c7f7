// mmops::ms_deform_attn (multi-scale deformable attention, mmcv's
// MultiScaleDeformableAttnFunction): schemas, CPU/CUDA registration and the
// public C++ API. Validation is in ms_deform_attn_checks.cpp, kernels in
// kernels/ms_deform_attn, the meta (shape) functions in ms_deform_attn_meta.cpp
// and autograd in ms_deform_attn_autograd.cpp.

#include "common/autocast.h"
#include "common/dispatch.h"
#include "common/index_policy.h"
#include "ms_deform_attn/ms_deform_attn_ops.h"

#include <mmops/ms_deform_attn.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m,
            "ms_deform_attn(Tensor value, Tensor spatial_shapes, Tensor level_start_index, "
            "Tensor sampling_locations, Tensor attention_weights) -> Tensor");
  // Gradients of value, sampling_locations and attention_weights.
  define_op(m,
            "_ms_deform_attn_backward(Tensor grad_output, Tensor value, Tensor spatial_shapes, "
            "Tensor level_start_index, Tensor sampling_locations, Tensor attention_weights) "
            "-> (Tensor grad_value, Tensor grad_sampling_locations, Tensor grad_attention_weights)");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), the level table when
// the index policy says so, then the kernel (CPU or CUDA).

void check_level_table(const at::Tensor& value, const at::Tensor& spatial_shapes, const at::Tensor& level_start_index) {
  if (detail::should_validate_indices(spatial_shapes)) {
    detail::check_levels(spatial_shapes, level_start_index, value.size(1));
  }
}

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& value, const at::Tensor& spatial_shapes, const at::Tensor& level_start_index,
                         const at::Tensor& sampling_locations, const at::Tensor& attention_weights) {
  detail::check_ms_deform_attn_forward(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
  check_level_table(value, spatial_shapes, level_start_index);
  return Kernel(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_entry(const at::Tensor& grad_output, const at::Tensor& value,
                                                              const at::Tensor& spatial_shapes,
                                                              const at::Tensor& level_start_index,
                                                              const at::Tensor& sampling_locations,
                                                              const at::Tensor& attention_weights) {
  detail::check_ms_deform_attn_backward(grad_output, value, spatial_shapes, level_start_index, sampling_locations,
                                        attention_weights);
  check_level_table(value, spatial_shapes, level_start_index);
  return Kernel(grad_output, value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
}

} // namespace

at::Tensor ms_deform_attn(const at::Tensor& value, const at::Tensor& spatial_shapes,
                          const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                          const at::Tensor& attention_weights) {
  static const auto op = detail::op_handle<MsDeformAttnFn>("mmops::ms_deform_attn");
  return op.call(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
}

} // namespace mmops

#define MMOPS_MS_DEFORM_ATTN_ENTRIES(m, device)                                       \
  m.impl("ms_deform_attn", &forward_entry<kernels::ms_deform_attn_forward_##device>); \
  m.impl("_ms_deform_attn_backward", &backward_entry<kernels::ms_deform_attn_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_MS_DEFORM_ATTN_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "ms_deform_attn")
