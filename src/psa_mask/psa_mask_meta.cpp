// Meta (shape and dtype only) kernels of psa_mask, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "psa_mask/psa_mask_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

namespace mmops {
namespace {

at::Tensor psa_mask_forward_meta(const at::Tensor& input, c10::string_view psa_type, at::IntArrayRef mask_size) {
  detail::check_psa_mask_forward(input, psa_type, mask_size);
  const std::vector<c10::SymInt> shape{input.sym_size(0), input.sym_size(2) * input.sym_size(3), input.sym_size(2),
                                       input.sym_size(3)};
  return at::empty_symint(shape, input.options());
}

at::Tensor psa_mask_backward_meta(const at::Tensor& grad_output, c10::string_view psa_type, at::IntArrayRef mask_size) {
  detail::check_psa_mask_backward(grad_output, psa_type, mask_size);
  const std::vector<c10::SymInt> shape{grad_output.sym_size(0), c10::SymInt(mask_size[0] * mask_size[1]),
                                       grad_output.sym_size(2), grad_output.sym_size(3)};
  return at::empty_symint(shape, grad_output.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("psa_mask", &mmops::psa_mask_forward_meta);
  m.impl("_psa_mask_backward", &mmops::psa_mask_backward_meta);
}
