// Autograd of furthest_point_sample(_with_dist): none (the output is indices;
// mmcv marks it non-differentiable too). Backward reaching the inputs raises.

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("furthest_point_sample", torch::autograd::autogradNotImplementedFallback());
  m.impl("furthest_point_sample_with_dist", torch::autograd::autogradNotImplementedFallback());
}
