// mmops::ms_deform_attn (multi-scale deformable attention, mmcv's
// MultiScaleDeformableAttnFunction): schemas, CPU/CUDA registration and the
// public C++ API. Validation is in ms_deform_attn_checks.cpp, kernels in
// kernels/ms_deform_attn, the meta (shape) functions in ms_deform_attn_meta.cpp
// and autograd in ms_deform_attn_autograd.cpp.

#include "ms_deform_attn/ms_deform_attn_ops.h"

#include <mmops/ms_deform_attn.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  m.def(
      "ms_deform_attn(Tensor value, Tensor spatial_shapes, Tensor level_start_index, "
      "Tensor sampling_locations, Tensor attention_weights) -> Tensor",
      {at::Tag::pt2_compliant_tag});
  // Gradients of value, sampling_locations and attention_weights.
  m.def(
      "_ms_deform_attn_backward(Tensor grad_output, Tensor value, Tensor spatial_shapes, "
      "Tensor level_start_index, Tensor sampling_locations, Tensor attention_weights) "
      "-> (Tensor grad_value, Tensor grad_sampling_locations, Tensor grad_attention_weights)",
      {at::Tag::pt2_compliant_tag});
}

namespace mmops {
namespace {

constexpr const char* kOp = "mmops::ms_deform_attn: ";

// Dispatcher entry points, one instance per device: validate, then call that
// device's kernel.

template <auto Forward>
at::Tensor forward_kernel(const at::Tensor& value, const at::Tensor& spatial_shapes,
                          const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                          const at::Tensor& attention_weights) {
  detail::check_ms_deform_attn_forward(kOp, value, spatial_shapes, level_start_index, sampling_locations,
                                       attention_weights);
  detail::check_levels_if_needed(kOp, spatial_shapes, level_start_index, value.size(1));
  return Forward(value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
}

template <auto Backward>
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_kernel(
    const at::Tensor& grad_output, const at::Tensor& value, const at::Tensor& spatial_shapes,
    const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
    const at::Tensor& attention_weights) {
  detail::check_ms_deform_attn_backward(kOp, grad_output, value, spatial_shapes, level_start_index,
                                        sampling_locations, attention_weights);
  detail::check_levels_if_needed(kOp, spatial_shapes, level_start_index, value.size(1));
  return Backward(grad_output, value, spatial_shapes, level_start_index, sampling_locations,
                  attention_weights);
}

} // namespace

at::Tensor ms_deform_attn(const at::Tensor& value, const at::Tensor& spatial_shapes,
                          const at::Tensor& level_start_index, const at::Tensor& sampling_locations,
                          const at::Tensor& attention_weights) {
  return ops::ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations,
                             attention_weights);
}

} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, CPU, m) {
  using namespace mmops;
  m.impl("ms_deform_attn", &forward_kernel<kernels::ms_deform_attn_forward_cpu>);
  m.impl("_ms_deform_attn_backward", &backward_kernel<kernels::ms_deform_attn_backward_cpu>);
}

#ifdef MMOPS_WITH_CUDA
TORCH_LIBRARY_IMPL(mmops, CUDA, m) {
  using namespace mmops;
  m.impl("ms_deform_attn", &forward_kernel<kernels::ms_deform_attn_forward_cuda>);
  m.impl("_ms_deform_attn_backward", &backward_kernel<kernels::ms_deform_attn_backward_cuda>);
}
#endif
