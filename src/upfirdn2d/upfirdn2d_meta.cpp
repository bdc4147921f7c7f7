// Meta (shape and dtype only) kernel of upfirdn2d, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic.

#include "upfirdn2d/upfirdn2d_ops.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace mmops {
namespace {

at::Tensor upfirdn2d_meta(const at::Tensor& input, const at::Tensor& kernel, c10::IntArrayRef up, c10::IntArrayRef down,
                          c10::SymIntArrayRef pad) {
  detail::check_upfirdn2d(input, kernel, up, down, pad);
  return at::empty_symint(detail::upfirdn2d_output_shape(input, kernel, up, down, pad), input.options());
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Meta, m) {
  m.impl("upfirdn2d", &mmops::upfirdn2d_meta);
}
