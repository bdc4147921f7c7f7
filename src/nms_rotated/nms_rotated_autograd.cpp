// Autograd of nms_rotated and nms_quadri: none (keep is an index tensor).

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("nms_rotated", torch::autograd::autogradNotImplementedFallback());
  m.impl("nms_quadri", torch::autograd::autogradNotImplementedFallback());
}
