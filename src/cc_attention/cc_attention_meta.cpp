// Meta (shape and dtype only) kernels of ca_weight and ca_map, for fake
// tensors, torch.compile and torch.export. Sizes stay symbolic.

#include "cc_attention/cc_attention_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

namespace mmops {
namespace {

at::Tensor like(const at::Tensor& x) {
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor ca_weight_meta(const at::Tensor& t, const at::Tensor& f) {
  detail::check_ca_weight(t, f);
  const std::vector<c10::SymInt> shape{t.sym_size(0), t.sym_size(2) + t.sym_size(3) - 1, t.sym_size(2), t.sym_size(3)};
  return at::empty_symint(shape, t.options());
}

std::tuple<at::Tensor, at::Tensor> ca_weight_backward_meta(const at::Tensor& grad_weight, const at::Tensor& t,
                                                           const at::Tensor& f) {
  detail::check_ca_weight_backward(grad_weight, t, f);
  return {like(t), like(f)};
}

at::Tensor ca_map_meta(const at::Tensor& weight, const at::Tensor& g) {
  detail::check_ca_map(weight, g);
  return like(g);
}

std::tuple<at::Tensor, at::Tensor> ca_map_backward_meta(const at::Tensor& grad_out, const at::Tensor& weight,
                                                        const at::Tensor& g) {
  detail::check_ca_map_backward(grad_out, weight, g);
  return {like(weight), like(g)};
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("ca_weight", &mmops::ca_weight_meta);
  m.impl("_ca_weight_backward", &mmops::ca_weight_backward_meta);
  m.impl("ca_map", &mmops::ca_map_meta);
  m.impl("_ca_map_backward", &mmops::ca_map_backward_meta);
}
