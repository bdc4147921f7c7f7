// Meta (shape and dtype only) kernels of three_interpolate, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "three_interpolate/three_interpolate_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor forward_meta(const at::Tensor& features, const at::Tensor& indices, const at::Tensor& weight) {
  detail::check_three_interpolate(features, indices, weight);
  return at::empty_symint({features.sym_size(0), features.sym_size(1), indices.sym_size(1)}, features.options());
}

std::tuple<at::Tensor, at::Tensor> backward_meta(const at::Tensor& grad_output, const at::Tensor& features,
                                                 const at::Tensor& indices, const at::Tensor& weight) {
  detail::check_three_interpolate_backward(grad_output, features, indices, weight);
  return {at::empty_symint(features.sym_sizes(), features.options()),
          at::empty_symint(weight.sym_sizes(), weight.options())};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("three_interpolate", &mmops::forward_meta);
  m.impl("_three_interpolate_backward", &mmops::backward_meta);
}
