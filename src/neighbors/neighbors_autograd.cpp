// Autograd of the neighbour queries: none, as in mmcv. The index outputs are
// integers; three_nn's distances carry no gradient (mmcv's backward returns
// None for both inputs), so three_nn runs below autograd and its outputs do
// not require grad.

#include "neighbors/neighbors_ops.h"

#include "common/dispatch.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

namespace mmops {
namespace {

std::tuple<at::Tensor, at::Tensor> three_nn_autograd(const at::Tensor& target, const at::Tensor& source) {
  static const auto op = detail::op_handle<ThreeNNFn>("mmops::three_nn");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(target, source);
}

} // namespace
} // namespace mmops

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("ball_query", torch::autograd::autogradNotImplementedFallback());
  m.impl("stack_ball_query", torch::autograd::autogradNotImplementedFallback());
  m.impl("knn", torch::autograd::autogradNotImplementedFallback());
  m.impl("three_nn", &mmops::three_nn_autograd);
}
