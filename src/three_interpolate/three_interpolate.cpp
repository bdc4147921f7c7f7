// mmops::three_interpolate: schemas, device entries (CPU/CUDA registration)
// and the public C++ API. Validation in three_interpolate_checks.cpp, kernels
// in kernels/three_interpolate, meta in three_interpolate_meta.cpp, autograd
// in three_interpolate_autograd.cpp.

#include "three_interpolate/three_interpolate_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/three_interpolate.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "three_interpolate(Tensor features, Tensor indices, Tensor weight) -> Tensor");
  define_op(m,
            "_three_interpolate_backward(Tensor grad_output, Tensor features, Tensor indices, Tensor weight) "
            "-> (Tensor grad_features, Tensor grad_weight)");
}

namespace mmops {
namespace {

template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& features, const at::Tensor& indices, const at::Tensor& weight) {
  detail::check_three_interpolate(features, indices, weight);
  detail::check_three_interpolate_indices(indices, features.size(2));
  return Kernel(features, indices, weight);
}

template <auto Kernel>
std::tuple<at::Tensor, at::Tensor> backward_entry(const at::Tensor& grad_output, const at::Tensor& features,
                                                  const at::Tensor& indices, const at::Tensor& weight) {
  detail::check_three_interpolate_backward(grad_output, features, indices, weight);
  detail::check_three_interpolate_indices(indices, features.size(2));
  return Kernel(grad_output, features, indices, weight);
}

} // namespace

at::Tensor three_interpolate(const at::Tensor& features, const at::Tensor& indices, const at::Tensor& weight) {
  static const auto op = detail::op_handle<ThreeInterpolateFn>("mmops::three_interpolate");
  return op.call(features, indices, weight);
}

} // namespace mmops

#define MMOPS_THREE_INTERPOLATE_ENTRIES(m, device)                                          \
  m.impl("three_interpolate", &forward_entry<kernels::three_interpolate_forward_##device>); \
  m.impl("_three_interpolate_backward", &backward_entry<kernels::three_interpolate_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_THREE_INTERPOLATE_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "three_interpolate")
