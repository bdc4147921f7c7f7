// Autograd of pixel_group: none (a grouping; the mean scores are not
// differentiable in mmcv either: backward reaching them raises).

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("pixel_group", torch::autograd::autogradNotImplementedFallback());
}
