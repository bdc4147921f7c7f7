// mmops::psa_mask: schemas, device entries (CPU/CUDA registration) and the
// public C++ API. Validation is in psa_mask_checks.cpp, kernels in
// kernels/psa_mask, the meta functions in psa_mask_meta.cpp and autograd in
// psa_mask_autograd.cpp.

#include "psa_mask/psa_mask_ops.h"

#include "common/autocast.h"
#include "common/dispatch.h"

#include <mmops/psa_mask.h>

#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mmops, m) {
  using mmops::detail::define_op;
  define_op(m, "psa_mask(Tensor input, str psa_type, int[2] mask_size) -> Tensor");
  define_op(m, "_psa_mask_backward(Tensor grad_output, str psa_type, int[2] mask_size) -> Tensor");
}

namespace mmops {
namespace {

// The device entries: validation (as the meta kernels), then the kernel.
template <auto Kernel>
at::Tensor forward_entry(const at::Tensor& input, c10::string_view psa_type, at::IntArrayRef mask_size) {
  return Kernel(input, detail::check_psa_mask_forward(input, psa_type, mask_size));
}

template <auto Kernel>
at::Tensor backward_entry(const at::Tensor& grad_output, c10::string_view psa_type, at::IntArrayRef mask_size) {
  return Kernel(grad_output, detail::check_psa_mask_backward(grad_output, psa_type, mask_size));
}

} // namespace

at::Tensor psa_mask(const at::Tensor& input, c10::string_view psa_type, at::IntArrayRef mask_size) {
  static const auto op = detail::op_handle<PsaMaskFn>("mmops::psa_mask");
  return op.call(input, psa_type, mask_size);
}

} // namespace mmops

#define MMOPS_PSA_MASK_ENTRIES(m, device)                                 \
  m.impl("psa_mask", &forward_entry<kernels::psa_mask_forward_##device>); \
  m.impl("_psa_mask_backward", &backward_entry<kernels::psa_mask_backward_##device>);

MMOPS_REGISTER_DEVICE_ENTRIES(MMOPS_PSA_MASK_ENTRIES)
MMOPS_REGISTER_AUTOCAST(kDataDtype, "psa_mask")
