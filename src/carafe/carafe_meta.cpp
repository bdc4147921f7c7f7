// Meta (shape and dtype only) kernels of carafe, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "carafe/carafe_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor carafe_meta(const at::Tensor& features, const at::Tensor& masks, int64_t kernel_size, int64_t group_size,
                       int64_t scale_factor) {
  detail::check_carafe_forward(features, masks, kernel_size, group_size, scale_factor);
  return at::empty_symint({features.sym_size(0), features.sym_size(1), masks.sym_size(2), masks.sym_size(3)},
                          features.options());
}

std::tuple<at::Tensor, at::Tensor> backward_meta(const at::Tensor& grad_output, const at::Tensor& features,
                                                 const at::Tensor& masks, int64_t kernel_size, int64_t group_size,
                                                 int64_t scale_factor) {
  detail::check_carafe_backward(grad_output, features, masks, kernel_size, group_size, scale_factor);
  return {at::empty_symint(features.sym_sizes(), features.options()),
          at::empty_symint(masks.sym_sizes(), masks.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("carafe", &mmops::carafe_meta);
  m.impl("_carafe_backward", &mmops::backward_meta);
}
