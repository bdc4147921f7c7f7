// Autograd of contour_expand: none (integer inputs and output).

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("contour_expand", torch::autograd::autogradNotImplementedFallback());
}
