// Autograd of min_area_polygons: none (the rectangle's choice of hull edge is
// piecewise; mmcv has no gradient either). Backward reaching the input raises.

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("min_area_polygons", torch::autograd::autogradNotImplementedFallback());
}
