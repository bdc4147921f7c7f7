// Autograd of points_in_polygons: none (a 0/1 indicator; mmcv has none
// either). Backward reaching the inputs raises.

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("points_in_polygons", torch::autograd::autogradNotImplementedFallback());
}
