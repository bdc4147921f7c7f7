// mmops::ca_weight and mmops::ca_map (criss-cross attention, CCNet): schemas,
// device entries (CPU/CUDA registration) and the public C++ API. Validation is
// in cc_attention_checks.cpp, kernels in kernels/cc_attention, the meta
// functions in cc_attention_meta.cpp and autograd in cc_attention_autograd.cpp.

#include "cc_attention/cc_attention_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/cc_attention.h>

#include <torch/library.h>

namespace {

// define_op's tags plus flexible_layout: the kernels take any strides (they make their
// inputs contiguous), so inductor keeps its own layouts around these ops. Without the tag
// inductor pins the inputs to the traced strides, and a 1x1 convolution feeding ca_map
// (CrissCrossAttention) made torch.compile(dynamic=True) specialise H and W.
void define_flexible(torch::Library& m, const char* schema) {
  m.def(schema, {at::Tag::pt2_compliant_tag, at::Tag::flexible_layout});
}

} // namespace

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  define_flexible(m, "ca_weight(Tensor t, Tensor f) -> Tensor");
  define_flexible(m, "_ca_weight_backward(Tensor grad_weight, Tensor t, Tensor f) -> (Tensor grad_t, Tensor grad_f)");
  define_flexible(m, "ca_map(Tensor weight, Tensor g) -> Tensor");
  define_flexible(m,
                  "_ca_map_backward(Tensor grad_out, Tensor weight, Tensor g) -> (Tensor grad_weight, Tensor grad_g)");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel. No
// index lives in tensor data, so there is no index policy to apply.

template <auto Kernel>
at::Tensor ca_weight_entry(const at::Tensor& t, const at::Tensor& f) {
  return Kernel(t, f, detail::check_ca_weight(t, f));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> ca_weight_backward_entry(const at::Tensor& grad_weight, const at::Tensor& t,
                                                            const at::Tensor& f) {
  return Kernel(grad_weight, t, f, detail::check_ca_weight_backward(grad_weight, t, f));
}

template <auto Kernel>
at::Tensor ca_map_entry(const at::Tensor& weight, const at::Tensor& g) {
  return Kernel(weight, g, detail::check_ca_map(weight, g));
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> ca_map_backward_entry(const at::Tensor& grad_out, const at::Tensor& weight,
                                                         const at::Tensor& g) {
  return Kernel(grad_out, weight, g, detail::check_ca_map_backward(grad_out, weight, g));
}

} // namespace

at::Tensor ca_weight(const at::Tensor& t, const at::Tensor& f) {
  static const auto op = detail::op_handle<CaWeightFn>("mmops::ca_weight");
  return op.call(t, f);
}

at::Tensor ca_map(const at::Tensor& weight, const at::Tensor& g) {
  static const auto op = detail::op_handle<CaMapFn>("mmops::ca_map");
  return op.call(weight, g);
}

} // namespace mmops

#define MMOPS_CC_ATTENTION_ENTRIES(m, device)                                                     \
  m.impl("ca_weight", &ca_weight_entry<kernels::ca_weight_forward_##device>);                     \
  m.impl("_ca_weight_backward", &ca_weight_backward_entry<kernels::ca_weight_backward_##device>); \
  m.impl("ca_map", &ca_map_entry<kernels::ca_map_forward_##device>);                              \
  m.impl("_ca_map_backward", &ca_map_backward_entry<kernels::ca_map_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_CC_ATTENTION_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "ca_weight", "ca_map")
