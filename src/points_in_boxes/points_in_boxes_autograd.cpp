// Autograd of points_in_boxes_part / _all: none (box indices and 0/1 flags;
// mmcv has none either). Backward reaching the inputs raises.

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mmops, Autograd, m) {
  m.impl("points_in_boxes_part", torch::autograd::autogradNotImplementedFallback());
  m.impl("points_in_boxes_all", torch::autograd::autogradNotImplementedFallback());
}
