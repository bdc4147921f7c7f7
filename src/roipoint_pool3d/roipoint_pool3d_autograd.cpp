// Autograd of roipoint_pool3d: none (mmcv's backward raises too). Backward
// reaching the inputs raises.

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("roipoint_pool3d", torch::autograd::autogradNotImplementedFallback());
}
